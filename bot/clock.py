"""Time is injected: everything that needs "now" takes a Clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time
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


_ZONE_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}")
"""What a zone's name looks like ("America/Argentina/Buenos_Aires", "Etc/GMT-2", "UTC")."""


def is_zone_name(name: str) -> bool:
    """Whether ``name`` is exactly an IANA zone of a place.

    Only a name of a zone's shape is opened ("../x", a NUL or 5,000 characters never are),
    and the database's files that are no place ("localtime", "posixrules", its ``posix/``
    and ``right/`` copies) are not one. Not by walking the list of zones: every process that
    reads its settings asks this once, and the walk costs about 20 ms.
    """
    if len(name) > 64 or not _ZONE_SHAPE.fullmatch(name) or name in NOT_PLACES:
        return False
    if name.startswith(("posix/", "right/")):
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


_HHMM = re.compile(r"^\s*(\d{1,2})(?::|\.|h)?(\d{2})?\s*$")


_AM_PM = re.compile(r"^\s*(\d{1,2})(?:[:.h](\d{2}))?\s*([ap])\.?\s*m\.?\s*$", re.IGNORECASE)
"""``7am``, ``7:30 pm``, ``10.15 p.m.``: the twelve-hour clock many people write."""


def parse_hhmm(text: str) -> time:
    """``07:30``, ``7:30``, ``0730``, ``7``, ``7am``, ``7:30 pm`` -> time.

    ValueError in plain words otherwise (``13pm`` and ``0am`` too: no such hour).
    """
    twelve = _AM_PM.match(text)
    if twelve is not None:
        hour, minute = int(twelve.group(1)), int(twelve.group(2) or 0)
        if not 1 <= hour <= 12 or minute > 59:
            raise ValueError(f"{text.strip()!r} is not a time of day; write it like 07:30")
        return time(hour % 12 + (12 if twelve.group(3).lower() == "p" else 0), minute)
    m = _HHMM.match(text)
    if m is None:
        raise ValueError(f"{text.strip()!r} is not a time of day; write it like 07:30")
    raw_h, raw_m = m.group(1), m.group(2)
    if raw_m is None and len(raw_h) > 2:
        raise ValueError(f"{text.strip()!r} is not a time of day; write it like 07:30")
    hour, minute = int(raw_h), int(raw_m or 0)
    if hour > 23 or minute > 59:
        raise ValueError(f"{text.strip()!r} is not a time of day; write it like 07:30")
    return time(hour, minute)
