"""Pieces of the outbox: the keyed-channel port, per-channel pacing, what a pass did."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from bot.messages import Address, OutboundMessage, Receipt


@runtime_checkable
class KeyedChannel(Protocol):
    """An adapter that can tag a push with an idempotency key and later look it up."""

    async def send_keyed(self, msg: OutboundMessage, key: str) -> Receipt:
        """Send ``msg`` tagged with ``key``."""
        ...

    async def find_sent(self, address: Address, key: str) -> Receipt | None:
        """The receipt of a message sent with ``key`` to ``address``, or None if none was."""
        ...


@runtime_checkable
class PresenceChannel(Protocol):
    """An adapter whose peers connect to one process (the pendant): it knows who is here."""

    def holds(self, address: Address) -> bool:
        """True when the peer at ``address`` is connected to this process now."""
        ...


class RateGate:
    """Paces sends on one channel and pauses it when the channel says "slow down"."""

    def __init__(self, rate: float, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._sleep = sleep
        self._next = 0.0
        self._paused_until = 0.0

    async def wait(self) -> None:
        """Wait for this caller's slot (slots are handed out in order, ``interval`` apart)."""
        now = time.monotonic()
        slot = max(now, self._next, self._paused_until)
        self._next = slot + self.interval
        if slot > now:
            await self._sleep(slot - now)

    def pause(self, seconds: float) -> None:
        """Hold every later slot for ``seconds`` (the peer's Retry-After)."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        self._next = max(self._next, self._paused_until)


@dataclass(slots=True)
class SendStats:
    """What one pass of the worker did."""

    delivered: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0
    deferred: int = 0
    fallbacks: int = 0
    rate_limited: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for ``lifebot jobs``."""
        parts = [
            f"{n} {label}"
            for label, n in (
                ("delivered", self.delivered),
                ("retried", self.retried),
                ("failed", self.failed),
                ("skipped", self.skipped),
                ("deferred", self.deferred),
                ("fell back", self.fallbacks),
            )
            if n
        ]
        return ", ".join(parts) or "nothing due"


@dataclass(frozen=True, slots=True)
class Target:
    """One identity a push can go to."""

    identity_id: int
    address: Address
