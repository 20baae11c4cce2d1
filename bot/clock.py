"""Time is injected: everything that needs "now" takes a Clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Something that tells the current time, always timezone-aware."""

    def now(self) -> datetime:
        """The current time in UTC."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        """The current time in UTC."""
        return datetime.now(UTC)
