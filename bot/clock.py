"""Time is injected: everything that needs "now" takes a Clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


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


def zone(name: str | None) -> ZoneInfo:
    """The zone by IANA name; UTC when the name is empty or unknown (never fails a turn)."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")
