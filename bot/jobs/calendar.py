"""lifebot's calendar: event wording and ICS (RFC 5545) export."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from storage.models import CalendarEvent

_ICS_LINE = 75
"""Content lines are folded at 75 octets (RFC 5545 §3.1)."""


def event_line(e: CalendarEvent, tz: ZoneInfo, *, with_day: bool = True) -> str:
    """``#4 Thu 12 Jun 15:00-16:00 Coffee (Blue Bottle; with Ana)``; ``... all day ...``."""
    start, end = e.start_at.astimezone(tz), e.end_at.astimezone(tz)
    day = f"{start:%a} {start.day} {start:%b} " if with_day else ""
    when = "all day" if e.all_day else f"{start:%H:%M}-{end:%H:%M}"
    extra = []
    if e.place:
        extra.append(e.place)
    if e.people:
        extra.append("with " + ", ".join(e.people))
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"#{e.id} {day}{when} {e.title}{tail}"


def _escape(text: str) -> str:
    return (
        text.replace("\\", "\\\\")
        .replace(";", "\\;")
        .replace(",", "\\,")
        .replace("\r\n", "\\n")
        .replace("\n", "\\n")
    )


def _fold(line: str) -> list[str]:
    """Split one content line into 75-octet pieces without breaking a UTF-8 character."""
    out: list[str] = []
    current, size = "", 0
    limit = _ICS_LINE
    for ch in line:
        n = len(ch.encode("utf-8"))
        if size + n > limit:
            out.append(current)
            current, size, limit = " ", 1, _ICS_LINE
        current += ch
        size += n
    out.append(current)
    return out


def _stamp(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def to_ics(events: list[CalendarEvent], *, name: str, now: datetime) -> str:
    """An iCalendar document with every event (times in UTC, so any client places them)."""
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//lifebot//calendar export//EN",
        "CALSCALE:GREGORIAN",
        f"X-WR-CALNAME:{_escape(name)}",
    ]
    for e in events:
        lines += [
            "BEGIN:VEVENT",
            f"UID:{e.uid}",
            f"DTSTAMP:{_stamp(now)}",
            f"DTSTART:{_stamp(e.start_at)}",
            f"DTEND:{_stamp(e.end_at)}",
            f"SUMMARY:{_escape(e.title)}",
            f"CREATED:{_stamp(e.created_at)}",
            f"LAST-MODIFIED:{_stamp(e.updated_at)}",
        ]
        if e.place:
            lines.append(f"LOCATION:{_escape(e.place)}")
        if e.people:
            lines.append(f"DESCRIPTION:{_escape('With ' + ', '.join(e.people))}")
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    folded = [piece for line in lines for piece in _fold(line)]
    return "\r\n".join(folded) + "\r\n"
