"""Dates in questions: "yesterday", "last week", "in March", "two weekends ago", "on 3 May".

Everything is resolved in the user's time zone into a half-open UTC window [start, end).
Phrases that name a time we cannot pin down ("the day before my birthday") are reported as
unresolved rather than guessed, so the answer can say so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open time range [start, end) in UTC, with the words that named it."""

    start: datetime
    end: datetime
    label: str

    def describe(self, tz: ZoneInfo) -> str:
        """The window in the user's local time, for answers ("Sat 8 Jun 00:00 - Sun 9 Jun")."""
        a = self.start.astimezone(tz)
        b = (self.end - timedelta(seconds=1)).astimezone(tz)
        if a.date() == b.date():
            return f"{a:%a %d %b %Y}"
        return f"{a:%a %d %b %Y} to {b:%a %d %b %Y}"


_MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
MONTHS = {m: i + 1 for i, m in enumerate(_MONTH_NAMES)}
MONTHS.update({k[:3]: v for k, v in list(MONTHS.items())})
MONTHS["sept"] = 9
_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAYS = {d: i for i, d in enumerate(_DAY_NAMES)}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}
_NUM = r"(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)"
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
# Bare month names only in full: "from Jan" is more often a person than January.
_MONTH_FULL = r"(?P<month>" + "|".join(m for m in MONTHS if len(m) > 3 or m == "may") + r")"
_WD = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
_PART = r"(?:\s+(?P<part>morning|afternoon|evening|night))?"

UNRESOLVED = re.compile(
    r"\b(?:the\s+)?(?:day|week|month|weekend|night)\s+(?:before|after)\s+(?:my|the|our|his|her)"
    r"\s+[\w' ]{2,30}|\b(?:before|after|since|during)\s+(?:my|the|our)\s+(?!last\b|past\b)"
    r"(?:birthday|wedding|trip|holiday|holidays|vacation|move|party|surgery|exam|interview)\b",
    re.IGNORECASE,
)


def _num(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word]


class _Resolver:
    """Turns local dates into UTC windows for one "now" and zone."""

    def __init__(self, now: datetime, tz: ZoneInfo) -> None:
        self.tz = tz
        self.now = now.astimezone(tz)
        self.today = self.now.date()

    def at(self, d: date, t: time = time(0)) -> datetime:
        return datetime.combine(d, t, tzinfo=self.tz).astimezone(UTC)

    def days(self, first: date, count: int, label: str) -> TimeWindow:
        return TimeWindow(self.at(first), self.at(first + timedelta(days=count)), label)

    def day_part(self, d: date, part: str | None, label: str) -> TimeWindow:
        spans = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 29)}
        if part is None:
            return self.days(d, 1, label)
        a, b = spans[part]
        start = self.at(d) + timedelta(hours=a)
        return TimeWindow(start, self.at(d) + timedelta(hours=b), label)

    def week_start(self, d: date) -> date:
        return d - timedelta(days=d.weekday())

    def month(self, year: int, month: int, label: str) -> TimeWindow:
        first = date(year, month, 1)
        nxt = date(year + (month == 12), month % 12 + 1, 1)
        return TimeWindow(self.at(first), self.at(nxt), label)

    def past_weekday(self, wd: int, *, strictly_before_today: bool) -> date:
        back = (self.today.weekday() - wd) % 7
        if back == 0 and strictly_before_today:
            back = 7
        return self.today - timedelta(days=back)

    def weekend(self, ago: int) -> date:
        """Saturday of the weekend ``ago`` weekends back (0: this or the current weekend)."""
        sat = self.past_weekday(5, strictly_before_today=False)
        if self.today.weekday() == 6:
            sat = self.today - timedelta(days=1)
        if ago > 0 and self.today.weekday() not in (5, 6):
            ago -= 1  # on a weekday, "last weekend" is the most recent one
        return sat - timedelta(days=7 * ago)


Builder = Callable[[re.Match[str]], TimeWindow | None]


def _rules(r: _Resolver) -> list[tuple[re.Pattern[str], Builder]]:  # noqa: PLR0915  (one small rule per phrase reads best as a table)
    """(pattern, builder) pairs; the match that starts earliest in the question wins."""
    rules: list[tuple[str, Builder]] = []

    def add(pattern: str) -> Callable[[Builder], Builder]:
        def deco(fn: Builder) -> Builder:
            rules.append((pattern, fn))
            return fn

        return deco

    @add(r"\b(?:the\s+)?day\s+before\s+yesterday\b")
    def _dby(m: re.Match[str]) -> TimeWindow:
        return r.days(r.today - timedelta(days=2), 1, m.group(0))

    @add(r"\blast\s+night\b")
    def _last_night(m: re.Match[str]) -> TimeWindow:
        return r.day_part(r.today - timedelta(days=1), "night", m.group(0))

    @add(r"\byesterday" + _PART + r"\b")
    def _yesterday(m: re.Match[str]) -> TimeWindow:
        return r.day_part(r.today - timedelta(days=1), m.group("part"), m.group(0))

    @add(r"\b(?:today|this\s+(?P<part>morning|afternoon|evening)|tonight|earlier\s+today)\b")
    def _today(m: re.Match[str]) -> TimeWindow:
        part = m.group("part") or ("evening" if "tonight" in m.group(0) else None)
        return r.day_part(r.today, part, m.group(0))

    @add(r"\b" + _NUM + r"\s+weekends?\s+ago\b")
    def _weekends_ago(m: re.Match[str]) -> TimeWindow:
        return r.days(r.weekend(_num(m.group("n"))), 2, m.group(0))

    @add(r"\b(?:(?P<which>last|this|past|previous)\s+)?weekend\b")
    def _weekend(m: re.Match[str]) -> TimeWindow:
        ago = 1 if m.group("which") in ("last", "past", "previous") else 0
        return r.days(r.weekend(ago), 2, m.group(0))

    @add(r"\b" + _NUM + r"\s+days?\s+ago\b")
    def _days_ago(m: re.Match[str]) -> TimeWindow:
        return r.days(r.today - timedelta(days=_num(m.group("n"))), 1, m.group(0))

    @add(r"\b" + _NUM + r"\s+weeks?\s+ago\b")
    def _weeks_ago(m: re.Match[str]) -> TimeWindow:
        start = r.week_start(r.today) - timedelta(weeks=_num(m.group("n")))
        return r.days(start, 7, m.group(0))

    @add(r"\b" + _NUM + r"\s+months?\s+ago\b")
    def _months_ago(m: re.Match[str]) -> TimeWindow:
        total = r.today.year * 12 + r.today.month - 1 - _num(m.group("n"))
        return r.month(total // 12, total % 12 + 1, m.group(0))

    @add(r"\b(?:in\s+the\s+)?(?:last|past)\s+" + _NUM + r"\s+(?P<unit>days?|weeks?|months?)\b")
    def _last_n(m: re.Match[str]) -> TimeWindow:
        n = _num(m.group("n"))
        unit = m.group("unit").rstrip("s")
        span = {"day": n, "week": 7 * n, "month": 30 * n}[unit]
        return TimeWindow(
            r.at(r.today - timedelta(days=span - 1)), r.at(r.today + timedelta(1)), m.group(0)
        )

    @add(r"\b(?P<which>last|this|past|previous)\s+week\b")
    def _week(m: re.Match[str]) -> TimeWindow:
        start = r.week_start(r.today)
        if m.group("which") != "this":
            start -= timedelta(weeks=1)
        return r.days(start, 7, m.group(0))

    @add(r"\b(?P<which>last|this|past|previous)\s+month\b")
    def _month(m: re.Match[str]) -> TimeWindow:
        if m.group("which") == "this":
            return r.month(r.today.year, r.today.month, m.group(0))
        total = r.today.year * 12 + r.today.month - 2
        return r.month(total // 12, total % 12 + 1, m.group(0))

    @add(r"\b(?P<which>last|this)\s+year\b")
    def _year(m: re.Match[str]) -> TimeWindow:
        y = r.today.year - (m.group("which") == "last")
        return TimeWindow(r.at(date(y, 1, 1)), r.at(date(y + 1, 1, 1)), m.group(0))

    @add(r"\b(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})\b")
    def _iso(m: re.Match[str]) -> TimeWindow | None:
        try:
            d = date(int(m.group("y")), int(m.group("mo")), int(m.group("d")))
        except ValueError:
            return None
        return r.days(d, 1, m.group(0))

    def _dated(month: int, day: int, year: str | None, label: str) -> TimeWindow | None:
        y = int(year) if year else r.today.year
        try:
            d = date(y, month, day)
        except ValueError:
            return None
        if not year and d > r.today:
            d = d.replace(year=y - 1)
        return r.days(d, 1, label)

    @add(
        r"\b(?:between|from)\s+(?:the\s+)?(?P<d1>\d{1,2})(?:st|nd|rd|th)?\s+(?:and|to|until|-)\s+"
        r"(?:the\s+)?(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?"
        + _MONTH
        + r"(?:,?\s+(?P<y>\d{4}))?\b"
    )
    def _day_range(m: re.Match[str]) -> TimeWindow | None:
        # "between 1 and 5 June" is the five days, not only the last one
        last = _dated(MONTHS[m.group("month")], int(m.group("d")), m.group("y"), m.group(0))
        first_day = int(m.group("d1"))
        if last is None or first_day > int(m.group("d")):
            return None
        span = int(m.group("d")) - first_day + 1
        start = last.start.astimezone(r.tz).date() - timedelta(days=span - 1)
        return r.days(start, span, m.group(0))

    @add(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+(?P<y>\d{4}))?\b")
    def _day_month(m: re.Match[str]) -> TimeWindow | None:
        return _dated(MONTHS[m.group("month")], int(m.group("d")), m.group("y"), m.group(0))

    @add(r"\b" + _MONTH + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{4}))?\b")
    def _month_day(m: re.Match[str]) -> TimeWindow | None:
        return _dated(MONTHS[m.group("month")], int(m.group("d")), m.group("y"), m.group(0))

    @add(r"\b(?:in|during|of)\s+" + _MONTH_FULL + r"(?:\s+(?P<y>\d{4}))?\b")
    def _in_month(m: re.Match[str]) -> TimeWindow:
        month = MONTHS[m.group("month")]
        year = int(m.group("y")) if m.group("y") else r.today.year
        if not m.group("y") and month > r.today.month:
            year -= 1
        return r.month(year, month, m.group(0))

    @add(r"\b(?:in|during)\s+(?P<y>(?:19|20)\d{2})\b")
    def _in_year(m: re.Match[str]) -> TimeWindow:
        y = int(m.group("y"))
        return TimeWindow(r.at(date(y, 1, 1)), r.at(date(y + 1, 1, 1)), m.group(0))

    @add(r"\b(?P<which>last|this|past|previous|on)?\s*" + _WD + _PART + r"\b")
    def _weekday(m: re.Match[str]) -> TimeWindow:
        which = m.group("which")
        wd = WEEKDAYS[m.group("wd")]
        if which == "this":
            d = r.week_start(r.today) + timedelta(days=wd)
            if d > r.today:
                d = r.past_weekday(wd, strictly_before_today=False)
        else:
            d = r.past_weekday(wd, strictly_before_today=which in ("last", "previous", "past"))
        return r.day_part(d, m.group("part"), m.group(0).strip())

    return [(re.compile(p, re.IGNORECASE), fn) for p, fn in rules]


@dataclass(frozen=True, slots=True)
class TimeParse:
    """What the time words of a question resolved to."""

    window: TimeWindow | None
    unresolved: str | None = None
    """A phrase that names a time we cannot resolve ("the day before my birthday")."""
    rest: str = ""
    """The question with the time words taken out (for topic matching)."""


_DATED = re.compile(
    r"\b(?:(?P<d1>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH.replace("month", "m1")
    + r"|" + _MONTH.replace("month", "m2") + r"\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?)"
    r",?\s+(?P<y>(?:19|20)\d{2})\b"
)  # fmt: skip
"""A calendar date with its year ("23 January, 2022", "August 3, 2023")."""
_BEFORE = re.compile(
    r"\b(?:the\s+|last\s+|a\s+)?(?:" + _NUM + r"\s+)?"
    r"(?P<unit>days?|weeks?|weekends?|months?|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"\s+before\s+(?:on\s+)?$"
)
_SPAN_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 31}


def _anchored(lowered: str, now: datetime, tz: ZoneInfo) -> TimeParse | None:
    """A time said relative to a date the question names, resolved against that date.

    "last Friday on 23 January, 2022" is 21 January 2022, not the Friday before today; "the
    week before August 3, 2023" is the week up to that day. The window runs from the relative
    time to the end of the named day, so what was said on that day about it is inside too.
    """
    m = _DATED.search(lowered)
    if m is None:
        return None
    month = MONTHS[m.group("m1") or m.group("m2")]
    try:
        day = date(int(m.group("y")), month, int(m.group("d1") or m.group("d2")))
    except ValueError:
        return None
    r = _Resolver(now, tz)
    end = r.at(day + timedelta(days=1))
    before = _BEFORE.search(lowered[: m.start()])
    if before is not None:
        unit = before.group("unit").rstrip("s")
        count = _num(before.group("n")) if before.group("n") else 1
        start = r.at(day - timedelta(days=count * _SPAN_DAYS.get(unit, 7)))
        label = before.group(0) + m.group(0)
        return TimeParse(TimeWindow(start, end, label), None, lowered.replace(label, " "))
    rest = lowered[: m.start()] + " " + lowered[m.end() :]
    relative = parse_time(rest, end - timedelta(seconds=1), tz)
    if relative.window is None:
        return None
    window = TimeWindow(
        min(relative.window.start, r.at(day)), end, f"{relative.window.label} ({m.group(0)})"
    )
    return TimeParse(window, None, relative.rest)


def parse_time(text: str, now: datetime, tz: ZoneInfo) -> TimeParse:
    """Find the first time expression in ``text`` and resolve it; see the module doc."""
    lowered = text.lower()
    bad = UNRESOLVED.search(lowered)
    if bad is not None:
        return TimeParse(None, bad.group(0).strip(), lowered.replace(bad.group(0), " "))
    anchored = _anchored(lowered, now, tz)
    if anchored is not None and anchored.window is not None and anchored.window.start <= now:
        return anchored
    resolver = _Resolver(now, tz)
    best: tuple[int, TimeWindow, str] | None = None
    for pattern, build in _rules(resolver):
        for m in pattern.finditer(lowered):
            window = build(m)
            if window is not None and (best is None or m.start() < best[0]):
                best = (m.start(), window, m.group(0))
            break
    if best is None:
        return TimeParse(None, None, lowered)
    window = best[1]
    if window.start > now:
        return TimeParse(None, f"{best[2]} (that is in the future)", lowered)
    since = _SINCE.search(lowered[: best[0]])
    if since is not None:
        # "since Monday" runs from Monday to now, not Monday alone
        label = since.group(0) + best[2]
        window = TimeWindow(window.start, resolver.at(resolver.today + timedelta(days=1)), label)
        return TimeParse(window, None, lowered.replace(label, " "))
    return TimeParse(window, None, lowered.replace(best[2], " "))


_SINCE = re.compile(r"\b(?:since|ever\s+since|from)\s*$")


_MENTION_HINT = re.compile(
    r"\b(?:yesterday|today|tonight|last|ago|week|weekend|month|year|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",
    re.IGNORECASE,
)


def mentioned_span(text: str, said_at: float) -> tuple[float, float] | None:
    """The past time a message talks about, resolved against when it was said (UTC).

    "We went camping last weekend", said on Monday 10 July, talks about 8-9 July. Used at
    index time so that a question about a date also finds what was said about it later.
    """
    if not _MENTION_HINT.search(text):
        return None
    now = datetime.fromtimestamp(said_at, UTC)
    parsed = parse_time(text, now, ZoneInfo("UTC"))
    if parsed.window is None:
        return None
    return parsed.window.start.timestamp(), parsed.window.end.timestamp()
