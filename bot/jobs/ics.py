"""Reading other people's calendars: an ICS (RFC 5545) document becomes plain events.

Recurring events are expanded over a window with ``recurring-ical-events`` (RRULE, RDATE,
EXDATE and edited occurrences with RECURRENCE-ID). Each occurrence gets a stable key (the UID,
plus the original start for a repeating event), so re-reading the same file or feed updates
rows instead of adding them. An all-day event (DATE values) becomes the user's local midnight to
midnight and is marked ``all_day``: it does not block a stay in the evening proposal scan.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.errors import CalendarError
from storage.repos.calendar import OutsideEvent

MAX_OCCURRENCES = 5000
"""A feed that expands to more than this in the window is cut (an endless daily rule over
years would otherwise fill the table)."""
MAX_BYTES = 5 * 1024 * 1024
"""Bigger documents are refused before parsing."""


def _instant(value: date | datetime, tz: ZoneInfo) -> datetime:
    """A DTSTART/DTEND value as an aware UTC instant; floating and DATE values are local."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=tz)
        return aware.astimezone(UTC)
    return datetime.combine(value, time(0), tzinfo=tz).astimezone(UTC)


def _text(component: Any, name: str) -> str | None:
    value = component.get(name)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _repeating_uids(calendar: Any) -> set[str]:
    """UIDs of events that repeat (or have edited occurrences): their key needs the start."""
    return {
        str(c.get("UID"))
        for c in calendar.walk("VEVENT")
        if c.get("RRULE") is not None
        or c.get("RDATE") is not None
        or c.get("RECURRENCE-ID") is not None
    }


def _occurrence(component: Any, tz: ZoneInfo, repeating: set[str]) -> OutsideEvent | None:
    start_prop = component.get("DTSTART")
    if start_prop is None:
        return None
    raw_start = start_prop.dt
    all_day = not isinstance(raw_start, datetime)
    start = _instant(raw_start, tz)
    end_prop = component.get("DTEND")
    if end_prop is not None:
        end = _instant(end_prop.dt, tz)
    elif component.get("DURATION") is not None:
        end = start + component.get("DURATION").dt
    else:
        # RFC 5545 3.6.1: no end means one day for a DATE start, the instant itself otherwise
        end = _instant(raw_start + timedelta(days=1), tz) if all_day else start
    uid = _text(component, "UID")
    if uid is None:
        key = f"no-uid:{_text(component, 'SUMMARY')}:{start:%Y%m%dT%H%M%SZ}"
    elif uid in repeating:
        # An occurrence is named by its original start, even when an edit moved it elsewhere.
        rid = component.get("RECURRENCE-ID")
        original = _instant(rid.dt, tz) if rid is not None else start
        key = f"{uid}/{original:%Y%m%dT%H%M%SZ}"
    else:
        key = uid  # a single event keeps its row when it is moved
    return OutsideEvent(
        key=key,
        title=(_text(component, "SUMMARY") or "(no title)")[:200],
        start=start,
        end=max(end, start),
        all_day=all_day,
        place=(_text(component, "LOCATION") or "")[:200] or None,
    )


def read_ics(data: bytes | str, tz: ZoneInfo, start: datetime, end: datetime) -> list[OutsideEvent]:
    """Every event occurrence overlapping [start, end), by start; CalendarError when unreadable.

    ``tz`` places floating times and all-day dates (the user's zone).
    """
    # Loaded on first use: start-up time is watched and most processes never read a calendar.
    import icalendar  # noqa: PLC0415
    import recurring_ical_events  # noqa: PLC0415

    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise CalendarError(f"the calendar is larger than {MAX_BYTES // (1024 * 1024)} MB")
    if b"BEGIN:VCALENDAR" not in raw[:4096].upper():
        raise CalendarError("this is not an iCalendar file (no BEGIN:VCALENDAR at the top)")
    try:
        calendar = icalendar.Calendar.from_ical(raw)
        repeating = _repeating_uids(calendar)
        found: list[Any] = []
        for component in recurring_ical_events.of(calendar).between(start, end):
            if len(found) >= MAX_OCCURRENCES:
                break
            found.append(component)
    except CalendarError:
        raise
    except Exception as exc:  # the parsers raise ValueError, KeyError and their own kinds
        raise CalendarError(f"the calendar could not be read: {exc}") from exc
    events: dict[str, OutsideEvent] = {}
    for component in found:
        if _text(component, "STATUS") == "CANCELLED":
            continue
        event = _occurrence(component, tz, repeating)
        if event is not None:
            events[event.key] = event
    return sorted(events.values(), key=lambda e: (e.start, e.key))
