"""A deterministic parser for reminder requests, in the user's time zone.

"remind me at 5pm to call mom", "in 20 minutes", "every Monday at 9", "tomorrow morning",
"on 12 June at 9:15", "every weekday at 7:45" ... No LLM: the same words always give the same
time. Each time expression is found by a pattern and cut out; what is left is what to remind.

Repeats that days of the week cannot say ("every first Monday of the month", "every 2 weeks
on Friday", "on the 15th of every month") become RFC 5545 rules run by ``dateutil.rrule`` on
local wall-clock dates. A request that says "every"/"weekly"/... but whose repeat cannot be
read is refused, never set as a one-off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr

from bot.clock import parse_hhmm
from bot.jobs.localtime import clock_change_note, hhmm, local_instant
from bot.jobs.reminders import patterns as pat


class PhraseError(ValueError):
    """The request has no time we can read; the message says what to write instead."""


class TooManyReminders(PhraseError):
    """The time was fine, but the user has as many reminders waiting as one may keep."""


@dataclass(frozen=True, slots=True)
class ParsedReminder:
    """What a request means."""

    text: str
    """What to remind about ("call mom"); empty when the request names nothing."""
    first_at: datetime
    """The first time it fires (UTC)."""
    recurrence: dict[str, Any] | None = None
    """None, ``{"kind": "days", "days": [0..6], "time": "HH:MM"}``,
    ``{"kind": "interval", "minutes": N}`` or ``{"kind": "rrule", "rule": "FREQ=MONTHLY;
    BYDAY=+1MO", "anchor": "YYYY-MM-DD", "words": "every first Monday of the month",
    "time": "HH:MM"}``."""
    lead: str = "to"
    """The word that joined the task in the request ("to", "about", "that")."""
    note: str = ""
    """Plain words when the (first) time asked for is skipped or repeated by a clock change."""


@dataclass(slots=True)
class _Found:
    days_ahead: int | None = None
    day: date | None = None
    at: time | None = None
    hour: int | None = None
    """An hour given without am/pm (resolved later)."""
    part: str | None = None
    delta: timedelta | None = None
    recurrence: dict[str, Any] | None = None
    same_weekday: bool = False
    """A weekday name that is today's: today if the time is still ahead, else next week."""


def _number(raw: str) -> float:
    raw = raw.lower().strip()
    if raw in pat.NUMBERS:
        return pat.NUMBERS[raw]
    return float(raw.replace(",", "."))


MAX_AHEAD = timedelta(days=366 * 2)
"""The furthest ahead a reminder can be set."""
MAX_EVERY = timedelta(days=366)
"""The longest gap "every N hours/minutes" can have."""


def _unit_delta(n: float, unit: str) -> timedelta:
    """``n`` units as a span; past any reminder's reach it is capped (no overflow).

    "in 99999999999 days" is still refused in words, as too far ahead, not by a crash.
    """
    try:
        return _span(n, unit)
    except OverflowError:
        return timedelta.max


def _span(n: float, unit: str) -> timedelta:
    u = unit.lower()
    if u.startswith("s"):
        return timedelta(seconds=n)
    if u.startswith(("mi", "m")) and not u.startswith("mo"):
        return timedelta(minutes=n)
    if u.startswith("h"):
        return timedelta(hours=n)
    if u.startswith("d"):
        return timedelta(days=n)
    return timedelta(weeks=n)


def _weekday(word: str) -> int:
    try:
        return pat.DAY_PREFIXES.index(word.lower()[:3])
    except ValueError as exc:
        raise PhraseError(f"{word!r} is not a day of the week") from exc


def _month(word: str) -> int:
    return pat.MONTHS[word.lower()[:3] if word.lower()[:4] != "sept" else "sept"]


class _Text:
    """The request with recognised pieces cut out."""

    def __init__(self, text: str) -> None:
        self.s = f" {text} "

    def take(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        m = pattern.search(self.s)
        if m is not None:
            self.s = self.s[: m.start()] + " " + self.s[m.end() :]
        return m


_SMALL = {"two": 2, "three": 3, "four": 4, "other": 2}
_ORDINAL_WORDS = {1: "first", 2: "second", 3: "third", 4: "fourth", -1: "last"}


def _count(raw: str | None) -> int:
    if raw is None:
        return 2  # "every fortnight"
    return int(raw) if raw.isdigit() else _SMALL[raw.lower()]


def _rule(t: _Text, f: _Found, today: date) -> bool:
    """Repeats beyond days of the week, as an RRULE anchored today; True when one was found."""
    code = pat.DAY_PREFIXES
    if m := t.take(pat.YEARLY):
        day = int(next(g for g in m.group("d", "d2", "d3", "d4") if g))
        month = _month(next(g for g in m.group("mon", "mon2", "mon3", "mon4") if g))
        try:
            date(2000, month, day)  # a leap year: 29 February is a day of the year
        except ValueError as exc:
            raise PhraseError(
                f"{day} {pat.MONTH_NAMES[month - 1]} is not a day of the year"
            ) from exc
        rule = f"FREQ=YEARLY;BYMONTH={month};BYMONTHDAY={day}"
        words = f"every year on {day} {pat.MONTH_NAMES[month - 1]}"
    elif m := t.take(pat.MONTHLY_NTH):
        nth, wd = pat.ORDINALS[m.group("nth").lower()], _weekday(m.group("wd"))
        rule = f"FREQ=MONTHLY;BYDAY={nth:+d}{code[wd][:2].upper()}"
        words = f"every {_ORDINAL_WORDS[nth]} {pat.DAY_NAMES[wd]} of the month"
    elif m := t.take(pat.MONTHLY_DAY):
        day = int(m.group("d") or m.group("d2") or m.group("d3"))
        if not 1 <= day <= 31:
            raise PhraseError(f"no month has a day {day}")
        # BYMONTHDAY=31 skips shorter months, as calendar apps do
        rule, words = f"FREQ=MONTHLY;BYMONTHDAY={day}", f"every month on day {day}"
    elif m := t.take(pat.EVERY_N_WEEKS):
        n = _count(m.group("n")) if (m.group("wd") or m.group("wd3")) else 2
        wd = _weekday(m.group("wd") or m.group("wd2") or m.group("wd3"))
        if not 1 <= n <= 52:
            raise PhraseError("I can repeat every 1 to 52 weeks")
        rule = f"FREQ=WEEKLY;INTERVAL={n};BYDAY={code[wd][:2].upper()}"
        # the count of weeks starts at the coming one of that day, not at today's week
        today += timedelta(days=(wd - today.weekday()) % 7)
        words = f"every {n} weeks on {pat.DAY_NAMES[wd]}" if n > 1 else f"every {pat.DAY_NAMES[wd]}"
    elif m := t.take(pat.EVERY_N_DAYS):
        n = _count(m.group("n"))
        if not 1 <= n <= 365:
            raise PhraseError("I can repeat every 1 to 365 days")
        rule, words = f"FREQ=DAILY;INTERVAL={n}", f"every {n} days"
    else:
        return False
    f.recurrence = {"kind": "rrule", "rule": rule, "anchor": today.isoformat(), "words": words}
    return True


def _recurrence(t: _Text, f: _Found, today: date) -> None:
    if _rule(t, f, today):
        return
    if m := t.take(pat.EVERY_N):
        n = _number(m.group("n") or "1")
        span = _unit_delta(n, m.group("unit"))
        if span > MAX_EVERY:
            raise PhraseError("I can repeat a reminder every 366 days at the longest")
        minutes = int(span.total_seconds() // 60)
        if minutes < 5:
            raise PhraseError("I can repeat a reminder every 5 minutes at the most")
        f.recurrence = {"kind": "interval", "minutes": minutes}
    elif t.take(pat.EVERY_WEEKDAY):
        f.recurrence = {"kind": "days", "days": [0, 1, 2, 3, 4]}
    elif t.take(pat.EVERY_WEEKEND):
        f.recurrence = {"kind": "days", "days": [5, 6]}
    elif m := t.take(pat.EVERY_DAYS) or t.take(pat.ON_PLURAL):
        words = re.split(r"\s*(?:,\s*and|,|and|&)\s*", m.group("days").strip())
        f.recurrence = {"kind": "days", "days": sorted({_weekday(w) for w in words if w})}
    elif m := t.take(pat.EVERY_DAY):
        f.recurrence = {"kind": "days", "days": list(range(7))}
        f.part = m.group("part") or f.part
    elif t.take(pat.EVERY_WEEK):
        f.recurrence = {"kind": "days", "days": []}  # filled with today's weekday later


def _relative(t: _Text, f: _Found) -> None:
    try:
        _relative_span(t, f)
    except OverflowError:  # "in 99999999999h30": further than any reminder can go
        f.delta = timedelta.max


def _relative_span(t: _Text, f: _Found) -> None:
    if t.take(pat.HOUR_AND_HALF):
        f.delta = timedelta(minutes=90)
    elif m := t.take(pat.IN_HMM):
        f.delta = timedelta(hours=int(m.group("h")), minutes=int(m.group("m")))
    elif m := t.take(pat.IN):
        f.delta = _unit_delta(_number(m.group("n")), m.group("unit"))
        if m.group("n2"):
            f.delta += timedelta(minutes=int(m.group("n2")))


def _numeric_date(m: re.Match[str], today: date, *, day_first: bool) -> date:
    a, b = int(m.group("a") or m.group("a2")), int(m.group("b") or m.group("b2"))
    day, month = (a, b) if day_first else (b, a)
    if month > 12 >= day:
        day, month = month, day  # 31/12 can only be read one way, whatever the user's order
    raw_year = m.group("y") or m.group("y2")
    if raw_year is None:
        if not 1 <= month <= 12:
            order = "day/month" if day_first else "month/day"
            raise PhraseError(f"{m.group(0).strip()} is not a date ({order} is how I read yours)")
        return _next_date(today, month, day)
    year = int(raw_year) + (2000 if len(raw_year) == 2 else 0)
    return _valid_date(year, month, day)


def _day(t: _Text, f: _Found, today: date, *, day_first: bool = True) -> None:  # noqa: PLR0912  (a ladder of patterns)
    if m := t.take(pat.NUMERIC_DATE):
        f.day = _numeric_date(m, today, day_first=day_first)
    if m := t.take(pat.IN_PART):
        f.part = m.group("part").lower()
    if f.day is not None:
        pass
    elif t.take(pat.DAY_AFTER):
        f.days_ahead = 2
    elif m := t.take(pat.TOMORROW):
        f.days_ahead = 1
        f.part = (m.group("part") or "").lower() or f.part
    elif t.take(pat.TONIGHT):
        f.days_ahead, f.part = 0, "tonight"
    elif m := t.take(pat.THIS_PART):
        f.days_ahead, f.part = 0, m.group("part").lower()
    elif t.take(pat.TODAY):
        f.days_ahead = 0
    elif t.take(pat.NEXT_WEEK):
        f.days_ahead = 7 - today.weekday()
    elif m := t.take(pat.ISO_DATE):
        f.day = _valid_date(int(m.group("y")), int(m.group("m")), int(m.group("d")))
    elif m := t.take(pat.DAY_MONTH) or t.take(pat.MONTH_DAY):
        f.day = _next_date(today, _month(m.group("mon")), int(m.group("d")))
    elif f.recurrence is None and (m := t.take(pat.WEEKDAY)):
        ahead = (_weekday(m.group("wd")) - today.weekday()) % 7
        # "Tue 17:00" said on a Tuesday morning means today; "next Tuesday" never does.
        f.days_ahead = 7 if ahead == 0 and m.group("next") else ahead
        f.same_weekday = ahead == 0 and not m.group("next")
        f.part = (m.group("part") or "").lower() or f.part
    elif m := t.take(pat.NTH):
        f.day = _next_nth(today, int(m.group("d")))


def _valid_date(y: int, m: int, d: int) -> date:
    try:
        return date(y, m, d)
    except ValueError as exc:
        raise PhraseError(f"{y}-{m:02d}-{d:02d} is not a date in the calendar") from exc


def _next_date(today: date, month: int, day: int) -> date:
    # 29 February can be up to eight years off (2096 to 2104); too far is refused later.
    for year in range(today.year, today.year + 9):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if candidate >= today:
            return candidate
    raise PhraseError(f"day {day} of month {month} is not a date in the calendar")


def _next_nth(today: date, day: int) -> date:
    y, m = today.year, today.month
    for _ in range(13):
        try:
            candidate = date(y, m, day)
        except ValueError:
            candidate = None
        if candidate is not None and candidate >= today:
            return candidate
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    raise PhraseError(f"no month has a day {day}")


def _clock(t: _Text, f: _Found) -> None:
    if m := t.take(pat.NOON):
        f.at = time(0) if m.group("w").lower() == "midnight" else time(12)
    elif m := t.take(pat.CLOCK):
        h, minute, ap = int(m.group("h")), int(m.group("m")), m.group("ap")
        f.at, f.hour = _with_meridiem(h, minute, ap, explicit=m.group("h").startswith("0"))
    elif m := t.take(pat.HOUR_AMPM):
        f.at, f.hour = _with_meridiem(int(m.group("h")), 0, m.group("ap"), explicit=False)
    elif m := t.take(pat.AT_HOUR):
        h = int(m.group("h") or m.group("h2"))
        f.at, f.hour = _with_meridiem(h, 0, None, explicit=False)


def _with_meridiem(
    h: int, minute: int, ap: str | None, *, explicit: bool
) -> tuple[time | None, int | None]:
    if minute > 59 or h > 24:
        raise PhraseError(f"{h}:{minute:02d} is not a time of day")
    if ap:
        if not 1 <= h <= 12:
            raise PhraseError(f"{h} {ap} is not a time of day")
        pm = ap.lower().startswith("p")
        return time((h % 12) + (12 if pm else 0), minute), None
    if h >= 13 or h == 0 or explicit:
        return time(h % 24, minute), None
    # 1..12 without am/pm: decided once we know the day and the part of day.
    return time(h % 12, minute), h


def _resolve_hour(f: _Found, given_day: bool) -> list[time]:
    """Candidate times of day, best first, for an hour given without am/pm.

    "at 5" means 17:00 (people rarely set reminders for 5 in the morning); "at 9" means the
    next nine o'clock; a part of day ("in the evening", "tonight") decides outright.
    """
    assert f.at is not None
    if f.hour is None:
        return [f.at]
    am, pm = f.at, f.at.replace(hour=f.at.hour + 12)
    if f.hour == 12 or f.part == "morning":
        choice = [am if f.hour != 12 else pm]
    elif f.part in ("afternoon", "evening", "night", "tonight"):
        choice = [pm]
    elif given_day:
        choice = [pm] if f.hour < 7 else [am]
    else:
        choice = [pm, am] if f.hour < 7 else [am, pm]
    return choice


def parse_reminder(
    request: str, now: datetime, tz: ZoneInfo, *, day_first: bool = True
) -> ParsedReminder:
    """Read a reminder request said at ``now`` by a user in ``tz``; PhraseError if unreadable.

    ``day_first``: 3/4 is the 3rd of April (else March 4th), per the user's date order.
    """
    local_now = now.astimezone(tz)
    today = local_now.date()
    if m := pat.PAST_WHEN.search(request.strip()):
        said = re.sub(r"\s+", " ", m.group(0).strip())
        raise PhraseError(
            f"'{said}' is in the past, so I can't remind you then. Give me a time still "
            "ahead, e.g. 'tomorrow at 9' or 'in 2 hours'."
        )
    t = _Text(request.strip())
    t.take(pat.REMIND)
    f = _Found()
    _recurrence(t, f, today)
    if f.recurrence is None and (m := pat.REPEAT_WORD.search(t.s)):
        raise PhraseError(
            f"I see '{m.group(0)}' but cannot read how often to repeat it, and I won't set it "
            "just once. Try 'every Monday at 9', 'every weekday at 8:30', 'every first Monday "
            "of the month at 9', 'every 2 weeks on Friday' or 'every year on 12 June'."
        )
    _relative(t, f)
    _day(t, f, today, day_first=day_first)
    _clock(t, f)
    text, lead = _task(t.s)

    if f.recurrence is not None:
        return _recurring(f, text, lead, now, tz)
    if f.delta is not None:
        if f.delta > MAX_AHEAD:
            raise PhraseError("that is more than two years away; I can only remind you sooner")
        first = now + f.delta
        if f.delta >= timedelta(days=1) and f.delta % timedelta(days=1) == timedelta(0):
            # "in 2 weeks" keeps the wall-clock time across a daylight-saving change
            ahead = local_now + f.delta
            first = local_instant(ahead.date(), local_now.time(), tz)
        if f.at is not None or f.part is not None:
            day = first.astimezone(tz).date()
            at = _resolve_hour(f, True)[0] if f.at else pat.PART_TIMES[f.part or "morning"]
            first = local_instant(day, at, tz)
        return _checked(ParsedReminder(text, first, None, lead), now)
    if f.same_weekday:
        try:
            return _on_day(f, text, lead, now, tz)
        except PhraseError:
            f.days_ahead = 7  # that time today has passed: the same weekday next week
    return _on_day(f, text, lead, now, tz)


def _on_day(f: _Found, text: str, lead: str, now: datetime, tz: ZoneInfo) -> ParsedReminder:
    """A one-off reminder on a given day and/or at a given time."""
    local_now = now.astimezone(tz)
    today = local_now.date()
    given_day = f.days_ahead is not None or f.day is not None
    if not given_day and f.at is None and f.part is None:
        raise PhraseError(
            "I couldn't find a time in that. Try e.g. 'remind me at 5pm to call mom', "
            "'in 20 minutes', 'tomorrow morning' or 'every Monday at 9'."
        )
    day = f.day or today + timedelta(days=f.days_ahead or 0)
    if f.at is None:
        at = pat.PART_TIMES.get(f.part or "", pat.DEFAULT_TIME)
        return _checked(_at(text, day, at, tz, lead), now)
    # A named day ("sunday at 10", said on a Sunday) fixes the hour as a named day does:
    # 10:00, and next Sunday once it has passed, never 22:00 today.
    candidates = _resolve_hour(f, given_day and (day != today or f.same_weekday))
    for at in candidates:
        if local_instant(day, at, tz) > now:
            return _at(text, day, at, tz, lead)
    if not given_day:  # "at 9" said after nine: tomorrow at nine
        return _at(text, day + timedelta(days=1), candidates[0], tz, lead)
    return _checked(_at(text, day, candidates[0], tz, lead), now)


def _at(text: str, day: date, at: time, tz: ZoneInfo, lead: str) -> ParsedReminder:
    """A one-off at wall-clock ``at`` on ``day``, with words if the clocks skip or repeat it."""
    return ParsedReminder(
        text, local_instant(day, at, tz), None, lead, clock_change_note(day, at, tz)
    )


def _recurring(f: _Found, text: str, lead: str, now: datetime, tz: ZoneInfo) -> ParsedReminder:
    rec = dict(f.recurrence or {})
    if rec["kind"] == "interval":
        first = now + timedelta(minutes=int(rec["minutes"]))
        return ParsedReminder(text, first, rec, lead)
    local_now = now.astimezone(tz)
    if rec["kind"] == "days" and not rec["days"]:
        rec["days"] = [local_now.weekday()]
    if f.at is not None:
        at = _resolve_hour(f, True)[0]
    else:
        at = pat.PART_TIMES.get(f.part or "", pat.DEFAULT_TIME)
    rec["time"] = hhmm(at)
    first = next_occurrence(rec, now, tz)
    if first - now > timedelta(days=366 * 2):
        raise PhraseError("that repeat first fires more than two years away")
    note = clock_change_note(first.astimezone(tz).date(), at, tz)
    return ParsedReminder(text, first, rec, lead, note)


def next_occurrence(rec: dict[str, Any], after: datetime, tz: ZoneInfo) -> datetime:
    """The first time a recurrence fires strictly after ``after`` (wall-clock, DST-safe)."""
    if rec.get("kind") == "interval":
        return after + timedelta(minutes=int(rec["minutes"]))
    at = parse_hhmm(str(rec.get("time", "09:00")))
    if rec.get("kind") == "rrule":
        return _next_by_rule(rec, at, after, tz)
    days = set(rec.get("days") or range(7))
    start = after.astimezone(tz).date()
    for offset in range(8):
        day = start + timedelta(days=offset)
        if day.weekday() in days:
            candidate = local_instant(day, at, tz)
            if candidate > after:
                return candidate
    raise PhraseError("that repeat pattern never fires")


def _next_by_rule(rec: dict[str, Any], at: time, after: datetime, tz: ZoneInfo) -> datetime:
    """The rule's next local date whose wall-clock ``at`` is after ``after`` (DST-safe)."""
    anchor = date.fromisoformat(str(rec["anchor"]))
    rule = rrulestr(str(rec["rule"]), dtstart=datetime.combine(anchor, time(0)))
    day = after.astimezone(tz).date() - timedelta(days=1)
    for _ in range(400):  # rules are at most monthly-ish: a handful of steps
        found = rule.after(datetime.combine(day, time(0)))
        if found is None:
            break
        candidate = local_instant(found.date(), at, tz)
        if candidate > after:
            return candidate
        day = found.date()
    raise PhraseError("that repeat pattern never fires")


def describe_recurrence(rec: dict[str, Any]) -> str:
    """``every Monday at 09:00``, ``every weekday at 07:45``, ``every 2 hours``."""
    if rec.get("kind") == "rrule":
        said = f"{rec.get('words', 'on a schedule')} at {rec.get('time', '09:00')}"
        day = re.search(r"FREQ=MONTHLY;BYMONTHDAY=(\d+)$", str(rec.get("rule", "")))
        if day is not None and int(day.group(1)) > 28:  # February can have 28 days
            said += f" (months without a day {day.group(1)} are skipped)"
        if rec.get("rule") == "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29":
            said += " (only in leap years)"
        return said
    if rec.get("kind") == "interval":
        minutes = int(rec["minutes"])
        if minutes % 60 == 0:
            hours = minutes // 60
            return "every hour" if hours == 1 else f"every {hours} hours"
        return f"every {minutes} minutes"
    days = sorted(set(rec.get("days") or range(7)))
    at = rec.get("time", "09:00")
    if len(days) == 7:
        which = "every day"
    elif days == [0, 1, 2, 3, 4]:
        which = "every weekday"
    elif days == [5, 6]:
        which = "every Saturday and Sunday"
    else:
        names = [pat.DAY_NAMES[d] for d in days]
        which = "every " + (" and ".join(names) if len(names) < 3 else ", ".join(names))
    return f"{which} at {at}"


def _task(rest: str) -> tuple[str, str]:
    text = re.sub(r"\s+", " ", rest).strip(" ,.;:!?-")
    lead = "to"
    for _ in range(4):
        m = pat.LEADING.match(text + " ") if text else None
        if m is None:
            break
        word = m.group(0).strip().lower()
        if word in ("about", "that"):
            lead = word
        text = text[m.end() :].strip(" ,.;:!?-") if m.end() <= len(text) else ""
    for _ in range(3):
        text = pat.TRAILING.sub("", text).strip(" ,.;:!?-")
    return text, lead


def _checked(parsed: ParsedReminder, now: datetime) -> ParsedReminder:
    if parsed.first_at <= now:
        raise PhraseError("that time has already passed; give me a time in the future")
    if parsed.first_at - now > MAX_AHEAD:
        raise PhraseError("that is more than two years away; I can only remind you sooner")
    return parsed
