"""lifebot's calendar: event wording and ICS (RFC 5545) export."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from storage.models import CalendarEvent

if TYPE_CHECKING:
    from icalendar import Event


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


def event_component(e: CalendarEvent, now: datetime, tz: ZoneInfo) -> Event:
    """One event as an iCalendar VEVENT (icalendar escapes and folds it).

    Timed events are written in UTC, so any client places them; an all-day event keeps its
    DATE values (the days in the owner's zone), so no client shows it as a 24-hour meeting.
    """
    from icalendar import Event  # noqa: PLC0415  # ~70 ms to import; see ``to_ics``

    event = Event()
    event.add("uid", e.uid)
    event.add("dtstamp", now.astimezone(UTC))
    if e.all_day:
        first = e.start_at.astimezone(tz).date()
        event.add("dtstart", first)
        event.add("dtend", max(e.end_at.astimezone(tz).date(), first + timedelta(days=1)))
    else:
        event.add("dtstart", e.start_at.astimezone(UTC))
        event.add("dtend", e.end_at.astimezone(UTC))
    event.add("summary", e.title)
    event.add("created", e.created_at.astimezone(UTC))
    event.add("last-modified", e.updated_at.astimezone(UTC))
    if e.place:
        event.add("location", e.place)
    if e.people:
        event.add("description", "With " + ", ".join(e.people))
    return event


def to_ics(
    events: list[CalendarEvent], *, now: datetime, tz: ZoneInfo, name: str | None = None
) -> str:
    """An iCalendar document (RFC 5545) with every event; ``name`` titles a whole calendar."""
    # Imported here, not at the top: wording an event line (briefings, the agent's tools,
    # every ``serve`` start) needs no icalendar, which took ~70 ms of each process's start.
    from icalendar import Calendar  # noqa: PLC0415

    calendar = Calendar()
    calendar.add("prodid", "-//lifebot//calendar//EN")
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    if name is not None:
        calendar.add("x-wr-calname", name)
    for e in events:
        calendar.add_component(event_component(e, now, tz))
    return str(calendar.to_ical().decode("utf-8"))
