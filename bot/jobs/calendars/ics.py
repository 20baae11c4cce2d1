"""Reading other people's calendars: an ICS (RFC 5545) document becomes plain events.

Recurring events are expanded over a window (RRULE, RDATE, EXDATE and edited occurrences with
RECURRENCE-ID; the rules are built by ``recurring-ical-events``). Expansion is lazy and
bounded while it runs: every repeating event is walked one occurrence at a time, the events
are merged earliest first, and the walk stops at the window's end. A calendar with more than
``MAX_OCCURRENCES`` in the window, or whose rules generate more than ``MAX_WALKED`` (a rule
that repeats every minute from 1970), is refused with the limit in words: the walk stops as
soon as it passes one, so it costs no more than that. Each occurrence gets a stable key
(the UID, plus the original start for a repeating event), so re-reading the same file or
feed updates rows instead of adding them. An all-day event (DATE values) becomes the user's
local midnight to midnight and is marked ``all_day``: it does not block a stay in the
evening proposal scan.

A document from outside is read in a bounded child (``python -m bot.isolated ...
bot.jobs.calendars.ics ZONE START END``, see ``own.py``): this module imports only the standard
library and the calendar libraries, reads the ICS on stdin and writes JSON on stdout.
"""

from __future__ import annotations

import heapq
import json
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


class _Budget:
    """Occurrences generated so far, against ``MAX_WALKED``."""

    def __init__(self) -> None:
        self.walked = 0
        self.spent = False


Item = tuple[datetime, int, Occurrence, bool]
"""(start instant, tie-breaker, occurrence, from an edit): what the merged walk orders."""


def _cancelled(component: Any) -> bool:
    return _text(component, "STATUS") == "CANCELLED"


def _overlaps(occurrence: Occurrence, start: datetime) -> bool:
    """It ends after ``start`` (an instant event: it is at or after ``start``)."""
    if occurrence.start == occurrence.end:
        return occurrence.start >= start
    return occurrence.end > start


def _series(
    rep: Any, tz: ZoneInfo, start: datetime, end: datetime, budget: _Budget, order: int
) -> Iterator[Item]:
    """The occurrences of one repeating event that may overlap [start, end), earliest first.

    ``rep`` is a ``recurring_ical_events.RepeatedEvent`` (2.x): its ``rule``, a dateutil
    rruleset of RRULE, RDATE, EXDATE and DTSTART, is iterated one occurrence at a time (its
    ``between`` would build every occurrence of the window first, copying the event for each).
    """
    from recurring_ical_events import is_pytz  # noqa: PLC0415

    # The rule runs in the event's own zone (or floating): a day of margin, exact filter below.
    lo = start - timedelta(days=1) - rep.duration
    lo = lo.astimezone(rep.tzinfo) if rep.tzinfo is not None else lo.replace(tzinfo=None)
    skip = _cancelled(rep.component)
    for generated in rep.rule:
        budget.walked += 1
        if budget.walked > MAX_WALKED:
            budget.spent = True
            return
        value = generated
        if value < lo:
            continue
        zone_of: Any = value.tzinfo
        if is_pytz(zone_of):
            # pytz needs the offset of each date (summer time) set again.
            value = zone_of.localize(value.replace(tzinfo=None))
            if rep.until is not None and value > rep.until and value not in rep.rdates:
                continue
        if value.timestamp() in rep.exdates_utc or value.date() in rep.exdates_utc:
            continue
        stop = rep.replace_ends.get(value.timestamp(), value + rep.duration)
        first, last = rep.convert_to_original_type(value), rep.convert_to_original_type(stop)
        when = _instant(first, tz)
        if when >= end:
            return
        occurrence = _occurrence(rep.component, first, last, _instant(value, tz), tz)
        if not skip and _overlaps(occurrence, start):
            yield when, order, occurrence, False


def _single(component: Any, tz: ZoneInfo, order: int, repeating: bool) -> Item | None:
    """An event that does not repeat, or an edited occurrence, as one item (None: no start)."""
    start_prop = component.get("DTSTART")
    if start_prop is None:
        return None
    first = start_prop.dt
    rid = component.get("RECURRENCE-ID")
    original: datetime | None = None
    if repeating:
        # An occurrence is named by its original start, even when an edit moved it elsewhere.
        original = _instant(rid.dt, tz) if rid is not None else _instant(first, tz)
    occurrence = _occurrence(component, first, _end_of(component, first), original, tz)
    return occurrence.start, order, occurrence, rid is not None


def _edits(components: list[Any], tz: ZoneInfo) -> dict[str, Any]:
    """Edited occurrences (RECURRENCE-ID) by the key of the occurrence they replace."""
    edits: dict[str, Any] = {}
    for c in components:
        rid = c.get("RECURRENCE-ID")
        if rid is None or c.get("DTSTART") is None:
            continue
        key = f"{c.get('UID')}/{_instant(rid.dt, tz):%Y%m%dT%H%M%SZ}"
        if key not in edits or int(c.get("SEQUENCE", 0)) >= int(edits[key].get("SEQUENCE", 0)):
            edits[key] = c  # the highest SEQUENCE wins
    return edits


def expand(calendar: Any, tz: ZoneInfo, start: datetime, end: datetime) -> list[Occurrence]:
    """Every occurrence overlapping [start, end), by start; CalendarError past a cap."""
    import recurring_ical_events  # noqa: PLC0415

    components = list(calendar.walk("VEVENT"))
    repeating = {
        str(c.get("UID"))
        for c in components
        if c.get("RRULE") is not None
        or c.get("RDATE") is not None
        or c.get("RECURRENCE-ID") is not None
    }
    edits = _edits(components, tz)
    budget = _Budget()
    streams: list[Iterator[Item]] = []
    singles: list[Item] = []
    unfolded = recurring_ical_events.of(calendar)  # applies X-WR-TIMEZONE, builds the rules
    for n, rep in enumerate(unfolded.repetitions):
        if rep.is_recurrence():
            continue  # an edit: taken from ``edits`` below
        if rep.component.get("RRULE") is None and rep.component.get("RDATE") is None:
            item = _single(rep.component, tz, n, str(rep.component.get("UID")) in repeating)
            if item is not None and not _cancelled(rep.component):
                singles.append(item)
            continue
        streams.append(_series(rep, tz, start, end, budget, n))
    order = len(unfolded.repetitions)
    for n, component in enumerate(edits.values(), start=order):
        item = _single(component, tz, n, repeating=True)
        if item is not None and not _cancelled(component):
            singles.append(item)
    singles.sort(key=lambda item: (item[0], item[1]))
    kept: dict[str, Occurrence] = {}
    for when, _, occurrence, from_edit in heapq.merge(*streams, iter(singles)):
        if when >= end:
            break
        if not _overlaps(occurrence, start):
            continue
        if occurrence.key in edits and not from_edit:
            continue  # the edit replaces it (wherever the edit moved it)
        kept[occurrence.key] = occurrence
        if len(kept) > MAX_OCCURRENCES:
            raise _too_many(start, end)
    if budget.spent:
        raise CalendarError(
            f"an event in it repeats too often (over {MAX_WALKED:,} times from its first "
            "date), my limit"
        )
    return _by_start(kept)


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
) -> list[Occurrence]:
    """Every event occurrence overlapping [start, end); CalendarError when unreadable.

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
        for calendar in icalendar.Calendar.from_ical(raw, multiple=True):
            found.update((e.key, e) for e in expand(calendar, tz, start, end))
            _check_count(found, start, end)
        return _by_start(found)
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
    events = [{**asdict(e), "start": e.start.isoformat(), "end": e.end.isoformat()} for e in found]
    sys.stdout.write(json.dumps({"events": events}, ensure_ascii=False))


def parse_answer(raw: bytes) -> list[Occurrence]:
    """The child's JSON as ``Expanded``; CalendarError when it could not read the calendar."""
    answer = json.loads(raw)
    if "error" in answer:
        raise CalendarError(str(answer["error"]))
    return [
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


if __name__ == "__main__":
    main()
