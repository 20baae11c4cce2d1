"""News for the process that holds a pendant's socket: PostgreSQL ``LISTEN``/``NOTIFY``.

A pendant is connected to one ``serve`` process; the leader's outbox may run in another, and
``lifebot device revoke`` (or the web page) in a third. Two kinds of news, each sent in the
same transaction as the change it announces (so it arrives once the change is visible):

* a push handed over: the leader found the pendant away, released the row and notifies; every
  process listening tries the row through its own channels, and the one the pendant is
  connected to sends it. Claiming a row is a conditional update, so only one process sends it.
* a device revoked: the process holding its socket closes it at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

log = logging.getLogger(__name__)

PUSH_CHANNEL = "lifebot_push"
"""The notification channel of handed-over pushes; the payload is an outbox row id."""
REVOKED_CHANNEL = "lifebot_device_revoked"
"""The notification channel of revoked devices; the payload is the device's id."""

Handler = Callable[[int], Awaitable[None]]
"""Called with a notification's id (an outbox row, a device)."""


async def _notify(session: AsyncSession, channel: str, value: int) -> None:
    await session.exec(  # type: ignore[call-overload]
        text("SELECT pg_notify(:channel, :payload)"),
        params={"channel": channel, "payload": str(value)},
    )


async def notify_push(session: AsyncSession, row_id: int) -> None:
    """Tell every listening process that row ``row_id`` waits for a channel it may hold."""
    await _notify(session, PUSH_CHANNEL, row_id)


async def notify_revoked(session: AsyncSession, device_id: int) -> None:
    """Tell every listening process that device ``device_id`` was revoked."""
    await _notify(session, REVOKED_CHANNEL, device_id)


class NotifyListener:
    """Listens on a connection of its own; calls the channel's handler for each notification."""

    def __init__(self, url: str, handlers: Mapping[str, Handler]) -> None:
        # asyncpg takes the plain URL, without SQLAlchemy's driver suffix.
        self.url = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        self.handlers = dict(handlers)
        """Channel name → what to do with each id heard on it."""
        self._conn: Any = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Open the connection and start listening."""
        import asyncpg  # noqa: PLC0415  # only PostgreSQL listens; ~60 ms off every SQLite start

        self._conn = await asyncpg.connect(self.url)
        for channel in self.handlers:
            await self._conn.add_listener(channel, self._heard)

    def _heard(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        handler = self.handlers.get(channel)
        if handler is None or not payload.isdigit():
            log.warning("ignored a malformed notification on %s: %r", channel, payload[:40])
            return
        task = asyncio.create_task(
            self._handle(handler, channel, int(payload)), name=f"{channel}-{payload}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, handler: Handler, channel: str, value: int) -> None:
        try:
            await handler(value)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not act on %s %s", channel, value)

    async def close(self) -> None:
        """Stop listening; wait for hand-overs in progress."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
