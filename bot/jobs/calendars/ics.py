"""Reading other people's calendars: an ICS (RFC 5545) document becomes plain events.

Recurring events are expanded over a window by ``recurring-ical-events`` (3.x, its public
``of(calendar).between``): RRULE, RDATE, EXDATE, edited occurrences with RECURRENCE-ID (the
highest SEQUENCE wins) and X-WR-TIMEZONE. Expansion is bounded while it runs. Before asking
the library, every repeat rule is walked here with dateutil, one occurrence at a time, to the
window's end: a rule that generates more than ``MAX_WALKED`` occurrences (every second from
1970) is refused with the limit in words the moment it passes it, and so is a calendar with
more than ``MAX_OCCURRENCES`` in the window (every minute): the library is never asked to build
them. The library is then asked one ``WINDOW`` at a time, and the cap is checked after each.
A rule that can never match (30 February, every minute) makes dateutil search to the year
9999 inside one call; nothing in this process can interrupt that, so the bounded child's
deadline stops it. Each occurrence gets a stable key (the UID, plus the original start for a
repeating event), so re-reading the same file or feed updates rows instead of adding them. An
all-day event (DATE values) becomes the user's local midnight to midnight and is marked
``all_day``: it does not block a stay in the evening proposal scan.

A document from outside is read in a bounded child (``python -m bot.isolated ...
bot.jobs.calendars.ics ZONE START END``, see ``own.py``): this module imports only the standard
library and the calendar libraries, reads the ICS on stdin and writes JSON on stdout.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.errors import CalendarError

MAX_OCCURRENCES = 5000
"""Occurrences one calendar may have in the window (an endless rule would fill the table)."""
MAX_WALKED = 100_000
"""Occurrences a calendar's rules may generate in all, counting those before the window."""
MAX_BYTES = 5 * 1024 * 1024
"""Bigger documents are refused before parsing."""
WINDOW = timedelta(days=92)
"""The span asked of ``recurring-ical-events`` at a time; the cap is checked after each. Each
ask walks every rule from its DTSTART again, so a quarter, not a month: 80 weekly events since
2018 and 300 single ones (4,724 occurrences in 13 months) take 1.2 s, not 1.6 s."""


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One event occurrence, as ``storage.repos.calendar.OutsideEvent`` stores it."""

    key: str
    """Stable identity in its source (UID plus original start)."""
    title: str
    """The title."""
    start: datetime
    """Start (aware, UTC)."""
    end: datetime
    """End (aware, UTC)."""
    all_day: bool
    """Whole local days."""
    place: str | None
    """Where, when given."""


@dataclass(frozen=True, slots=True)
class Expanded:
    """What one calendar document gave: its occurrences and how many events were unreadable."""

    events: list[Occurrence]
    """Every occurrence overlapping the window, by start."""
    skipped: int = 0
    """Events no reader can place (a broken or missing start, length or repeat rule): left
    out, so that one bad event does not cost the rest of the calendar."""


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
    text = str(value).replace("\x00", "").strip()  # PostgreSQL's text columns refuse a NUL
    return text or None


def _occurrence(
    component: Any,
    start_value: date | datetime,
    end_value: date | datetime,
    original: datetime | None,
    tz: ZoneInfo,
) -> Occurrence:
    """An occurrence of ``component`` from ``start_value`` to ``end_value``.

    ``original`` is the occurrence's original start for an event that repeats (its key), or
    None for a single event (keyed by its UID alone, so it keeps its row when it moves).
    """
    all_day = not isinstance(start_value, datetime)
    start = _instant(start_value, tz)
    end = _instant(end_value, tz)
    uid = _text(component, "UID")
    if uid is None:
        key = f"no-uid:{_text(component, 'SUMMARY')}:{start:%Y%m%dT%H%M%SZ}"
    elif original is not None:
        key = f"{uid}/{original:%Y%m%dT%H%M%SZ}"
    else:
        key = uid
    return Occurrence(
        key=key,
        title=(_text(component, "SUMMARY") or "(no title)")[:200],
        start=start,
        end=max(end, start),
        all_day=all_day,
        place=(_text(component, "LOCATION") or "")[:200] or None,
    )


def _end_of(component: Any, start: date | datetime) -> date | datetime:
    """DTEND, or DTSTART + DURATION, or RFC 5545 3.6.1's default (a day, or the instant)."""
    end_prop = component.get("DTEND")
    if end_prop is not None:
        end: date | datetime = end_prop.dt
        return end
    if component.get("DURATION") is not None:
        after: date | datetime = start + component.get("DURATION").dt
        return after
    return start + timedelta(days=1) if not isinstance(start, datetime) else start


def _cancelled(component: Any) -> bool:
    return _text(component, "STATUS") == "CANCELLED"


def _overlaps(occurrence: Occurrence, start: datetime) -> bool:
    """It ends after ``start`` (an instant event: it is at or after ``start``)."""
    if occurrence.start == occurrence.end:
        return occurrence.start >= start
    return occurrence.end > start


def _values(component: Any, name: str) -> list[date | datetime]:
    """Every date of a property that may repeat and hold lists (RDATE, EXDATE)."""
    found = component.get(name)
    if found is None:
        return []
    found = found if isinstance(found, list) else [found]
    values: list[date | datetime] = []
    for prop in found:
        for item in getattr(prop, "dts", []):
            value = item.dt
            values.append(value[0] if isinstance(value, tuple) else value)  # a PERIOD's start
    return values


def _readable(component: Any) -> bool:
    """Whether an event's start, end, dates and repeat rules can all be read."""
    try:
        first = component["DTSTART"].dt
        _end_of(component, first)
        _values(component, "RDATE")
        _values(component, "EXDATE")
        if component.get("RECURRENCE-ID") is not None:
            _ = component["RECURRENCE-ID"].dt
        found = component.get("RRULE")
        rules = [] if found is None else found if isinstance(found, list) else [found]
        return len(list(_rules(component))) == len(rules)
    except Exception:  # noqa: BLE001  (the parsers raise ValueError, KeyError and their own)
        return False


def _drop_unreadable(calendar: Any) -> int:
    """Take the events no reader can place out of ``calendar``; how many there were."""
    broken = [c for c in calendar.subcomponents if c.name == "VEVENT" and not _readable(c)]
    for component in broken:
        calendar.subcomponents.remove(component)
    return len(broken)


def _rules(component: Any) -> Iterator[Any]:
    """The component's RRULEs as dateutil rules from its DTSTART (unreadable ones skipped).

    Only to count how far they walk: the occurrences themselves come from
    ``recurring-ical-events``, which also mends the rules' common mistakes.
    """
    from dateutil.rrule import rrulestr  # noqa: PLC0415

    first, found = component.get("DTSTART"), component.get("RRULE")
    if first is None or found is None:
        return
    dtstart = first.dt if isinstance(first.dt, datetime) else datetime.combine(first.dt, time(0))
    for prop in found if isinstance(found, list) else [found]:
        text = prop.to_ical().decode("utf-8", "replace")
        try:
            yield rrulestr(text, dtstart=dtstart, cache=False)
        except (ValueError, TypeError, OverflowError):
            # UNTIL in UTC beside a local or all-day DTSTART (the library mends it): the
            # same rule in wall-clock time walks as far, give or take hours.
            floating = re.sub(r"(UNTIL=[0-9T]+)Z", r"\1", text)
            try:
                yield rrulestr(floating, dtstart=dtstart.replace(tzinfo=None), cache=False)
            except (ValueError, TypeError, OverflowError):
                continue  # the library refuses it with its own words


_FINE = frozenset({"DAILY", "HOURLY", "MINUTELY", "SECONDLY"})
_DAY_PARTS = ("BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY")


def _never_matches(text: str) -> bool:
    """A DAILY-or-finer rule whose day filters match no date at all (30 February).

    dateutil searches such a rule day by day to the year 9999 inside one call (about 12 s).
    The same day filters in a YEARLY rule match every day the rule could fall on, and the
    Gregorian calendar repeats every 400 years: a YEARLY search of the last 401 years that
    dateutil knows finds none exactly when there is none, in milliseconds.
    """
    from dateutil.rrule import rrulestr  # noqa: PLC0415

    parts = dict(part.split("=", 1) for part in text.upper().split(";") if "=" in part)
    if parts.get("FREQ") not in _FINE or not any(name in parts for name in _DAY_PARTS):
        return False
    probe = ["FREQ=YEARLY"]
    for name in ("BYMONTH", *_DAY_PARTS, "WKST"):
        if name in parts:
            value = parts[name]
            if name == "BYDAY":  # "1MO" counts only in MONTHLY and YEARLY rules
                value = ",".join(re.sub(r"^[+-]?\d+", "", day) for day in value.split(","))
            probe.append(f"{name}={value}")
    try:
        rule = rrulestr(";".join(probe), dtstart=datetime(9599, 1, 1, tzinfo=UTC), cache=False)
        return next(iter(rule), None) is None
    except (ValueError, TypeError, OverflowError):
        return False  # the library and the walk below judge it


def _drop_empty_rules(components: list[Any]) -> None:
    """Take away RRULEs that can never match: what is left (DTSTART, RDATE) is the same set."""
    for c in components:
        found = c.get("RRULE")
        if found is None:
            continue
        rules = found if isinstance(found, list) else [found]
        kept = [r for r in rules if not _never_matches(r.to_ical().decode("utf-8", "replace"))]
        if len(kept) == len(rules):
            continue
        del c["RRULE"]
        for rule in kept:
            c.add("RRULE", rule)


def _check_walk(components: list[Any], tz: ZoneInfo, start: datetime, end: datetime) -> None:
    """Refuse, before expanding, rules that walk too far or fill the window too full.

    ``recurring-ical-events`` asks every rule for a time span, and dateutil walks a rule
    from its DTSTART to the span's end in one call that nothing can interrupt: a rule that
    repeats every second from 1970 would never return. So each rule is walked here first, one
    occurrence at a time, to the window's end: past ``MAX_WALKED`` occurrences in all it is
    refused as repeating too often, and past ``MAX_OCCURRENCES`` starting in the window (more
    than its EXDATEs and edits could take away) as too many, the moment either is passed.
    """
    walked = 0
    inside = 0
    # What EXDATEs and edits (each moves one occurrence, perhaps out) can take away.
    slack = sum(
        len(_values(c, "EXDATE")) + (c.get("RECURRENCE-ID") is not None) for c in components
    )
    for c in components:
        for value in _values(c, "RDATE"):
            walked += 1
            inside += start <= _instant(value, tz) < end
        for rule in _rules(c):
            for value in rule:
                walked += 1
                if walked > MAX_WALKED:
                    raise CalendarError(
                        f"an event in it repeats too often (over {MAX_WALKED:,} times from "
                        "its first date), my limit"
                    )
                when = _instant(value, tz)
                if when >= end:
                    break
                if when >= start:
                    inside += 1
                    if inside - slack > MAX_OCCURRENCES:
                        raise _too_many(start, end)
    if walked > MAX_WALKED:
        raise CalendarError(
            f"an event in it repeats too often (over {MAX_WALKED:,} times from its first "
            "date), my limit"
        )


def _mend_ends(components: list[Any]) -> None:
    """An end before the start becomes the start, as before (the library refuses the event)."""
    for c in components:
        first, last = c.get("DTSTART"), c.get("DTEND")
        if first is None or last is None:
            continue
        a, b = first.dt, last.dt
        if type(a) is not type(b):
            continue  # a date beside a date-time: the library's to judge
        if isinstance(a, datetime) and (a.tzinfo is None) != (b.tzinfo is None):
            continue
        if b < a:
            c["DTEND"] = c["DTSTART"]


def _windows(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    """[start, end) in ``WINDOW`` steps, each widened by a day either side.

    The library compares floating and all-day times with the span in its own way; the
    margin lets it return everything near the edges, and the exact test is ``_overlaps``.
    """
    at = start
    while at < end:
        yield at - timedelta(days=1), min(at + WINDOW, end) + timedelta(days=1)
        at += WINDOW


def expand(calendar: Any, tz: ZoneInfo, start: datetime, end: datetime) -> Expanded:
    """Every occurrence overlapping [start, end), by start; CalendarError past a cap.

    Events that cannot be read are left out and counted (``Expanded.skipped``).
    """
    import recurring_ical_events  # noqa: PLC0415

    skipped = _drop_unreadable(calendar)
    components = list(calendar.walk("VEVENT"))
    repeating = {
        str(c.get("UID"))
        for c in components
        if c.get("RRULE") is not None
        or c.get("RDATE") is not None
        or c.get("RECURRENCE-ID") is not None
    }
    _drop_empty_rules(components)
    _check_walk(components, tz, start, end)
    _mend_ends(components)
    # X-WR-TIMEZONE is applied here; EXDATE, RDATE and edits (the highest SEQUENCE) too.
    query = recurring_ical_events.of(calendar)
    kept: dict[str, Occurrence] = {}
    for low, high in _windows(start, end):
        for component in query.between(low, high):
            first = component["DTSTART"].dt
            original: datetime | None = None
            if str(component.get("UID")) in repeating:
                # Named by its original start, even when an edit moved it elsewhere.
                original = _instant(component["RECURRENCE-ID"].dt, tz)
            occurrence = _occurrence(component, first, _end_of(component, first), original, tz)
            if _cancelled(component) or occurrence.start >= end or not _overlaps(occurrence, start):
                continue
            kept[occurrence.key] = occurrence
            if len(kept) > MAX_OCCURRENCES:
                raise _too_many(start, end)
    return Expanded(_by_start(kept), skipped)


def _too_many(start: datetime, end: datetime) -> CalendarError:
    return CalendarError(
        f"it has more than {MAX_OCCURRENCES:,} events between {start:%Y-%m-%d} and "
        f"{end:%Y-%m-%d}, my limit"
    )


def _check_count(found: dict[str, Occurrence], start: datetime, end: datetime) -> None:
    if len(found) > MAX_OCCURRENCES:
        raise _too_many(start, end)


def _by_start(kept: dict[str, Occurrence]) -> list[Occurrence]:
    return sorted(kept.values(), key=lambda e: (e.start, e.key))


def read_ics(
    data: bytes | str, tz: ZoneInfo, start: datetime, end: datetime, *, several: bool = False
) -> Expanded:
    """Every event occurrence overlapping [start, end); CalendarError when unreadable.

    A document that is not a calendar is refused; single events in it that cannot be read
    are skipped and counted.

    ``tz`` places floating times and all-day dates (the user's zone); ``several``: the data
    holds several VCALENDAR documents one after the other (a CalDAV calendar's events).
    Blocking, and bounded in time only by the caps: run it in the bounded child
    (``own.py``).
    """
    # Loaded on first use: start-up time is watched and most processes never read a calendar.
    import icalendar  # noqa: PLC0415

    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise CalendarError(f"the calendar is larger than {MAX_BYTES // (1024 * 1024)} MB")
    if b"BEGIN:VCALENDAR" not in raw[:4096].upper():
        raise CalendarError("this is not an iCalendar file (no BEGIN:VCALENDAR at the top)")
    try:
        if not several:
            return expand(icalendar.Calendar.from_ical(raw), tz, start, end)
        found: dict[str, Occurrence] = {}
        skipped = 0
        for calendar in icalendar.Calendar.from_ical(raw, multiple=True):
            part = expand(calendar, tz, start, end)
            found.update((e.key, e) for e in part.events)
            skipped += part.skipped
            _check_count(found, start, end)
        return Expanded(_by_start(found), skipped)
    except CalendarError:
        raise
    except Exception as exc:  # the parsers raise ValueError, KeyError and their own kinds
        raise CalendarError(f"the calendar could not be read: {exc}") from exc


def main() -> None:
    """The child: ``ZONE START END [several]``, the ICS on stdin, JSON on stdout."""
    zone_name, start, end, *rest = sys.argv[1:]
    try:
        found = read_ics(
            sys.stdin.buffer.read(),
            ZoneInfo(zone_name),
            datetime.fromisoformat(start),
            datetime.fromisoformat(end),
            several=rest == ["several"],
        )
    except CalendarError as exc:
        sys.stdout.write(json.dumps({"error": str(exc)}))
        return
    events = [
        {**asdict(e), "start": e.start.isoformat(), "end": e.end.isoformat()} for e in found.events
    ]
    answer = {"events": events, "skipped": found.skipped}
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))


def parse_answer(raw: bytes) -> Expanded:
    """The child's JSON as ``Expanded``; CalendarError when it could not read the calendar."""
    answer = json.loads(raw)
    if "error" in answer:
        raise CalendarError(str(answer["error"]))
    events = [
        Occurrence(
            key=str(e["key"]),
            title=str(e["title"]),
            start=datetime.fromisoformat(e["start"]),
            end=datetime.fromisoformat(e["end"]),
            all_day=bool(e["all_day"]),
            place=e["place"],
        )
        for e in answer["events"]
    ]
    return Expanded(events, int(answer.get("skipped", 0)))


if __name__ == "__main__":
    main()
