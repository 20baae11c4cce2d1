"""Which stays become proposed events (pure): the rules of issue 24.

* a stay shorter than 15 minutes is not proposed;
* stays at home-like or ignored places are not proposed;
* a stay that overlaps a timed calendar event is not proposed (the event already says what it
  was); all-day events do not block;
* a stay that runs from the evening into the next morning is split at 22:00 local into an
  activity and an overnight part: only the activity is proposed, and only if it lasted 3 hours
  or more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

SCAN_AT = time(21, 30)
"""Default local time of the daily scan."""
MIN_STAY = timedelta(minutes=15)
SPLIT_AT = time(22, 0)
MIN_ACTIVITY = timedelta(hours=3)
SKIPPED_KINDS = frozenset({"home", "ignored"})


@dataclass(frozen=True, slots=True)
class StayFacts:
    """What the rules need to know about one stay."""

    id: int
    """The stay's row id."""
    start: datetime
    """Start (aware)."""
    end: datetime
    """End (aware)."""
    place: str | None
    """The named place, None when unknown."""
    kind: str = "normal"
    """The place's kind (``normal``, ``home``, ``ignored``)."""
    area: str | None = None
    """For an unnamed place: the nearest town, when known."""


@dataclass(frozen=True, slots=True)
class Busy:
    """A calendar event as the rules see it."""

    start: datetime
    """Start (aware)."""
    end: datetime
    """End (aware)."""
    all_day: bool = False
    """Marked all-day by its source (an imported or subscribed all-day event): never blocks."""


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A proposed event from a stay."""

    stay_id: int
    """The stay it came from."""
    start: datetime
    """Start (aware, UTC)."""
    end: datetime
    """End (aware, UTC)."""
    place: str | None
    """The place's name; None asks "What was this place?"."""
    area: str | None = None
    """For an unnamed place: the nearest town, when known."""

    def title(self, tz: ZoneInfo) -> str:
        """``Time at gym, 18:00-19:15`` (unknown places: ``Time at a new place, ...``)."""
        return stay_title(self.place, self.start, self.end, tz, self.area)


def stay_title(
    place: str | None, start: datetime, end: datetime, tz: ZoneInfo, area: str | None = None
) -> str:
    """The plain title of a proposal from a stay: ``Time at gym, 18:00-19:15`` (local times)."""
    a, b = start.astimezone(tz), end.astimezone(tz)
    where = place or (f"a new place near {area}" if area else "a new place")
    return f"Time at {where}, {a:%H:%M}\u2013{b:%H:%M}"


def all_day(event: Busy, tz: ZoneInfo) -> bool:
    """Starts and ends at local midnight (whole local days, whatever their length)."""
    a, b = event.start.astimezone(tz), event.end.astimezone(tz)
    return a.time() == time(0) and b.time() == time(0) and b.date() > a.date()


def activity_part(stay: StayFacts, tz: ZoneInfo) -> tuple[datetime, datetime] | None:
    """The part of the stay worth proposing; None when there is none."""
    a, b = stay.start.astimezone(tz), stay.end.astimezone(tz)
    if b.date() > a.date():
        cut = datetime.combine(a.date(), SPLIT_AT, tzinfo=tz)
        if a >= cut:
            return None  # began after 22:00 and ran overnight: all of it is the night
        return (a, cut) if cut - a >= MIN_ACTIVITY else None
    return (a, b) if b - a >= MIN_STAY else None


def suggestions(
    stays: Sequence[StayFacts], events: Sequence[Busy], tz: ZoneInfo
) -> list[Suggestion]:
    """The proposals the rules allow, oldest first."""
    timed = [e for e in events if not (e.all_day or all_day(e, tz))]
    out: list[Suggestion] = []
    for stay in sorted(stays, key=lambda s: s.start):
        if stay.kind in SKIPPED_KINDS or stay.end - stay.start < MIN_STAY:
            continue
        part = activity_part(stay, tz)
        if part is None:
            continue
        start, end = part
        if any(e.start < end and e.end > start for e in timed):
            continue
        out.append(
            Suggestion(stay.id, start.astimezone(UTC), end.astimezone(UTC), stay.place, stay.area)
        )
    return out


def scan_time(text: str | None) -> time:
    """A stored ``HH:MM`` scan time, or the default 21:30."""
    if not text:
        return SCAN_AT
    hour, _, minute = text.partition(":")
    return time(int(hour), int(minute or 0))
