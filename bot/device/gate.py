"""Which pendant sockets may stay: counted from the TCP accept, before any WebSocket upgrade.

Every accepted socket holds a file descriptor, so the count starts when the kernel hands the
socket over, not when the upgrade completes: a flood of half-open sockets (connected, silent)
would otherwise exhaust the process's descriptors, and every ``accept`` after that fails.

Three pools:

* **waiting**: sockets that have not shown credentials yet. At most ``max_waiting`` in all and
  ``max_waiting_per_address`` per remote address. When a new socket arrives and its pool is
  full, the *oldest* waiting socket is dropped (newest wins): a real pendant sends its token
  within milliseconds of connecting, so the oldest silent socket is the one least likely to be
  a pendant, and a flood cannot keep a newcomer out by being there first.
* **presenting**: sockets whose token arrived and is being checked. Never dropped to make
  room (a check takes milliseconds); counted against ``max_waiting`` so they cannot pile up.
* **devices**: authenticated pendants: the reserve. Waiting sockets never take these slots,
  so a flood cannot push out a pendant that is connected, nor take the place of one that has
  just proved who it is.

Refusals are counted and logged once per interval (``RefusalLog``), never once per socket.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Protocol

log = logging.getLogger(__name__)


class Socket(Protocol):
    """What the gate needs of a connection: a way to drop it at once."""

    def abort(self) -> None:
        """Close the TCP connection now (no closing handshake), freeing its descriptor."""
        ...


class RefusalLog:
    """The first refusal is logged at once; then one line per ``interval`` with the count."""

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self.total = 0
        """Every refusal since start (for tests and ``status``)."""
        self._pending = 0
        self._why = ""
        self._since = 0.0
        """When the last line was logged (monotonic)."""
        self._timer: asyncio.TimerHandle | None = None

    def refused(self, why: str) -> None:
        """Count one refused socket."""
        self.total += 1
        self._why = why
        if self._timer is None:
            log.warning(
                "refused a pendant connection: %s (more are counted: one line every %g s)",
                why,
                self.interval,
            )
            self._since = time.monotonic()
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._flush)
        else:
            self._pending += 1

    def _flush(self) -> None:
        if not self._pending:
            self._timer = None  # quiet again: the next refusal is logged at once
            return
        self._say()
        self._timer = asyncio.get_running_loop().call_later(self.interval, self._flush)

    def _say(self) -> None:
        now = time.monotonic()
        log.warning(
            "refused %d more pendant connection(s) in the last %.0f s: %s",
            self._pending,
            now - self._since,
            self._why,
        )
        self._pending, self._since = 0, now

    def close(self) -> None:
        """Stop the timer; what was counted but not yet logged is logged now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending:
            self._say()


class SocketGate:
    """Admits, promotes and forgets pendant sockets (see the module docstring)."""

    def __init__(
        self,
        *,
        max_waiting: int,
        max_waiting_per_address: int,
        max_devices: int,
        refusals: RefusalLog,
    ) -> None:
        self.max_waiting = max_waiting
        self.max_waiting_per_address = max_waiting_per_address
        self.max_devices = max_devices
        self.refusals = refusals
        self._waiting: OrderedDict[Socket, str] = OrderedDict()
        """Sockets without credentials yet, oldest first, with their remote address."""
        self._presenting: dict[Socket, str] = {}
        self._devices: set[Socket] = set()
        self._per_address: dict[str, int] = {}
        """Waiting and presenting sockets per remote address."""

    @property
    def waiting(self) -> int:
        """Sockets not yet authenticated (waiting or presenting)."""
        return len(self._waiting) + len(self._presenting)

    @property
    def devices(self) -> int:
        """Authenticated pendants."""
        return len(self._devices)

    def admit(self, sock: Socket, address: str) -> bool:
        """A socket was just accepted: keep it (dropping the oldest waiting one if need be).

        False when it was refused (and aborted): every slot is held by sockets whose tokens
        are being checked.
        """
        crowded = self._per_address.get(address, 0) >= self.max_waiting_per_address
        if crowded and not self._drop_oldest(address):
            return self._refuse(sock, "too many from one address are checking tokens")
        if self.waiting >= self.max_waiting and not self._drop_oldest(None):
            return self._refuse(sock, "too many connections are checking tokens")
        self._waiting[sock] = address
        self._per_address[address] = self._per_address.get(address, 0) + 1
        return True

    def presenting(self, sock: Socket) -> None:
        """The socket sent a token: it is checked now and no longer dropped to make room."""
        address = self._waiting.pop(sock, None)
        if address is not None:
            self._presenting[sock] = address

    def authenticated(self, sock: Socket) -> bool:
        """The token was good: move the socket to the devices' reserve; False when full."""
        if self._forget_unauthenticated(sock) is None and sock not in self._devices:
            return False  # already dropped (or never admitted)
        if len(self._devices) >= self.max_devices:
            self.refusals.refused(f"more than {self.max_devices} pendants connected")
            return False
        self._devices.add(sock)
        return True

    def release(self, sock: Socket) -> None:
        """The socket closed: free its slot."""
        self._forget_unauthenticated(sock)
        self._devices.discard(sock)

    def _forget_unauthenticated(self, sock: Socket) -> str | None:
        address = self._waiting.pop(sock, None)
        if address is None:
            address = self._presenting.pop(sock, None)
        if address is not None:
            left = self._per_address[address] - 1
            if left:
                self._per_address[address] = left
            else:
                del self._per_address[address]
        return address

    def _drop_oldest(self, address: str | None) -> bool:
        """Abort the oldest waiting socket (of ``address``, when given); False when none."""
        for sock, where in self._waiting.items():
            if address is None or where == address:
                self._forget_unauthenticated(sock)
                sock.abort()
                self.refusals.refused(
                    f"a socket silent for too long made room for a new one (at most "
                    f"{self.max_waiting} without a token, {self.max_waiting_per_address} per "
                    "address)"
                )
                return True
        return False

    def _refuse(self, sock: Socket, why: str) -> bool:
        sock.abort()
        self.refusals.refused(why)
        return False
