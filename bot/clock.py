"""Time is injected: everything that needs "now" takes a Clock."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

NOT_PLACES = frozenset({"localtime", "posixrules", "Factory"})
"""Files of the zone database that are no place: this server's own zone, a template, and a
placeholder whose clock reads "-00". ``ZoneInfo`` opens them; a person's zone is never one."""


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
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        return ZoneInfo("UTC")


@cache
def zone_names() -> frozenset[str]:
    """Every IANA zone a person may have (reading them walks a folder: once per process)."""
    return frozenset(available_timezones()) - NOT_PLACES


def is_zone_name(name: str) -> bool:
    """Whether ``name`` is exactly an IANA zone of a place.

    Checked against the list, never opened as a file: "localtime", "../x" or 5,000 characters
    are simply not one.
    """
    return name in zone_names()
