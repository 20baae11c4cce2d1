"""A clock that tests move by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class ManualClock:
    """Tells the time it was set to; ``advance`` and ``set`` move it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2025, 6, 2, 8, 0, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")

    def now(self) -> datetime:
        """The current (manual) time in UTC."""
        return self._now.astimezone(UTC)

    def set(self, when: datetime) -> datetime:
        """Jump to ``when`` (aware); return the new now."""
        if when.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = when
        return self.now()

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move forward by ``delta`` or by timedelta keyword arguments; return the new now."""
        self._now += delta if delta is not None else timedelta(**kwargs)
        return self.now()
