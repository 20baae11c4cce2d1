"""Dates in questions: "yesterday", "last week", "in March", "two weekends ago", "on 3 May".

Everything is resolved in the user's time zone into a half-open UTC window [start, end).
The phrase classes, each tested as a class in ``tests/test_timeparse_classes.py``:

- relative to today ("yesterday", "two weekends ago", "last Friday", "in the past 3 days");
- calendar dates in any common punctuation ("3 May 2024", "May 3,2024", "May 3rd , 2024",
  "3-May-2024", "2024-05-03", "2024/05/03") and named months and years ("in March 2024");
- a part of a named month, read inside that month and never relative to today ("the second
  weekend of March 2024", "the last week of June", "the first Monday of May 2023",
  "early/mid/late May 2024", "the end of May 2024"); "the week of 3 May 2024" is the week
  holding that day;
- a range of two named times, both included: "2024-03-01 to 2024-03-31", "between May 1 and
  May 9, 2024", "from 1 March 2024 until 31 March 2024" (said backwards: the same days);
- a bound on a named time: "since"/"from" (to today), "as of"/"by"/"until"/"up to" (from the
  beginning to the end of it), "before" (up to its start), "after" (from its end to today);
- relative to a named date ("the week before August 3, 2023", "last Friday on 23 January");
- named times of a year (``yeartimes``): seasons by hemisphere, holidays with a year or "last",
  parts and quarters of a year, decades; "the weekend before last", "a fortnight ago", "two
  years ago", "a few weeks ago" (a span, not one week), "between March and May 2025", "on the
  3rd", "Sunday the 12th of October" (the year it fits), 14/06/2025 (day or month first by
  zone), "the week after <a named time>" (that week, not all time since). These are tested
  as classes in ``tests/test_timeparse_year_classes.py``.

Phrases that name a time only through an event ("after the move", "since the wedding", "the
day before my birthday", "since I moved") are reported as unresolved, with the event's words
(``TimeParse.event``), so search still looks for the topic and uses the event as a soft hint
instead of filtering by a guessed date.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.agent.retrieval import yeartimes

OPEN_START = datetime(1970, 1, 1, tzinfo=UTC)
"""Where a window with no lower bound ("as of May 2024") starts."""


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open time range [start, end) in UTC, with the words that named it."""

    start: datetime
    end: datetime
    label: str
    open_start: bool = False
    """No lower bound was said ("as of May 2024", "before June"): ``start`` is ``OPEN_START``."""

    def describe(self, tz: ZoneInfo) -> str:
        """The window in the user's local time, for answers ("Sat 8 Jun 00:00 - Sun 9 Jun")."""
        a = self.start.astimezone(tz)
        b = (self.end - timedelta(seconds=1)).astimezone(tz)
        if self.open_start:
            return f"up to {b:%a %d %b %Y}"
        if a.date() == b.date():
            return f"{a:%a %d %b %Y}"
        return f"{a:%a %d %b %Y} to {b:%a %d %b %Y}"


_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december")  # fmt: skip
MONTHS = {m: i + 1 for i, m in enumerate(_MONTH_NAMES)}
MONTHS.update({k[:3]: v for k, v in list(MONTHS.items())})
MONTHS["sept"] = 9
_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAYS = {d: i for i, d in enumerate(_DAY_NAMES)}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3,
           "several": 4}  # fmt: skip
VAGUE = {"few": (2, 4), "several": (3, 7)}
"""Counts that are not one number: "a few weeks ago" is two to four weeks back."""
ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
            "4th": 4, "fifth": 5, "5th": 5, "last": -1, "final": -1}  # fmt: skip
_NUM = r"(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few|several)"
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
# Bare month names only in full: "from Jan" is more often a person than January.
_MONTH_FULL = r"(?P<month>" + "|".join(m for m in MONTHS if len(m) > 3 or m == "may") + r")"
_WD = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
_MONTH_WORDS = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATE_AFTER = r"(?!,?\s+(?:the\s+)?\d{1,2}(?:st|nd|rd|th)?\b|,?\s+(?:" + _MONTH_WORDS + r")\b)"
"""Not followed by a date: in "Sunday the 12th of October" the date, not the weekday, counts."""
_PART = r"(?:\s+(?P<part>morning|afternoon|evening|night))?"
_YEAR = r"(?P<y>(?:19|20)\d{2})"
_DAY = r"(?P<d>\d{1,2})(?:st|nd|rd|th)?"
_DM_SEP = r"(?:\s+(?:of\s+)?|\s*-\s*)"
"""Between a day and its month: "3 May", "3rd of May", "3-May"."""
_Y_SEP = r"(?:\s*[,.]\s*|\s+|\s*-\s*)"
"""Before a year: "May 3 2024", "May 3, 2024", "May 3,2024", "May 3 ,2024", "3-May-2024"."""
_ORD = r"(?P<ord>first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last|final)"

_EVENT_NOUNS = (
    r"birthday|wedding|trip|holidays?|vacation|move|moving|party|surgery|operation|exams?|"
    r"interview|funeral|concert|graduation|breakup|break-up|divorce|accident|conference|"
    r"marathon|race|honeymoon|retreat|festival|camp|recital|game|match|launch|deadline|"
    r"appointment|visit|meeting|ceremony|show|performance|reunion|retirement|promotion|"
    r"diagnosis|birth|christening|baptism|anniversary|competition|tournament|workshop|event|"
    r"storm|fire|flood|lockdown|pandemic|(?:new\s+)?job"
)
_EVENT_VERBS = (
    r"moved|started|quit|left|joined|got|broke|came|returned|graduated|retired|married|"
    r"arrived|met|finished|lost|began|opened|signed|adopted|bought|sold|switched|changed|"
    r"had|went|took|became|divorced|split|visited|launched|passed"
)
_TIME_START = r"(?:in|on|at|last|this|yesterday|today|tonight|ago|between|from|during)\b"
"""Words that start a time phrase: an event's words stop there ("after I moved in May")."""
UNRESOLVED = re.compile(
    r"\b(?:the\s+)?(?:day|week|month|weekend|night|morning|evening|year)\s+(?:before|after)\s+"
    r"(?:my|the|our|his|her|their|\w+'s)\s+(?P<e1>[\w'-]+(?:\s+(?!"
    + _TIME_START
    + r")[\w'-]+){0,2})"
    r"|\b(?:before|after|since|during|around|until|till)\s+(?:my|the|our|his|her|their|\w+'s)\s+"
    r"(?!last\b|past\b|previous\b)(?P<e2>(?:[a-z-]+\s+){0,2}(?:" + _EVENT_NOUNS + r"))\b"
    r"|\b(?:before|after|since|ever\s+since)\s+(?:i|we|he|she|they|you|[a-z]+)\s+"
    r"(?P<e3>(?:" + _EVENT_VERBS + r")\b(?:\s+(?!" + _TIME_START + r")[a-z]+){0,3})",
    re.IGNORECASE,
)
"""A time named only through an event of the person's life."""
_EVENT_STOP = frozenset(
    ["the", "a", "an", "my", "our", "his", "her", "their", "to", "in", "on", "at", "of", "up",
     "back", "into", "out", "from", "with", "and"]
)  # fmt: skip


def _num(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word]


def _year_end(y: int) -> date:
    return date(y + 1, 1, 1)


class _Resolver:
    """Turns local dates into UTC windows for one "now" and zone."""

    def __init__(self, now: datetime, tz: ZoneInfo) -> None:
        self.tz = tz
        self.zone = str(getattr(tz, "key", "UTC"))
        self.now = now.astimezone(tz)
        self.today = self.now.date()

    def at(self, d: date, t: time = time(0)) -> datetime:
        return datetime.combine(d, t, tzinfo=self.tz).astimezone(UTC)

    def days(self, first: date, count: int, label: str) -> TimeWindow:
        return TimeWindow(self.at(first), self.at(first + timedelta(days=count)), label)

    def span(self, first: date, after_last: date, label: str) -> TimeWindow:
        return TimeWindow(self.at(first), self.at(after_last), label)

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

    def month_year(self, month: int, year: str | None) -> int:
        """The year of a named month: the one said, else the latest such month not ahead."""
        if year:
            return int(year)
        return self.today.year - (month > self.today.month)

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


def nth_in_month(year: int, month: int, ordinal: int, unit: str) -> tuple[date, date]:
    """[first day, day after the last) of "the <ordinal> <unit> of" a month.

    ``unit`` is a weekday name, ``weekend`` (the Saturday and the Sunday after it: the first
    weekend is the one of the month's first Saturday) or ``week`` (days 1-7, 8-14, 15-21,
    22-28, 29-end; the last week is the month's last seven days). ``ordinal`` -1 is the last.
    Raises ValueError when the month has no such one (a fifth Monday in a short month).
    """
    length = calendar.monthrange(year, month)[1]
    first = date(year, month, 1)
    if unit == "week":
        if ordinal == -1:
            start = date(year, month, length - 6)
            return start, start + timedelta(days=7)
        lo = 7 * (ordinal - 1) + 1
        if lo > length:
            raise ValueError("no such week")
        return date(year, month, lo), date(year, month, min(lo + 6, length)) + timedelta(days=1)
    wd = 5 if unit == "weekend" else WEEKDAYS[unit]
    days = [first + timedelta(days=i) for i in range(length)]
    matching = [d for d in days if d.weekday() == wd]
    if ordinal == -1:
        chosen = matching[-1]
    elif ordinal <= len(matching):
        chosen = matching[ordinal - 1]
    else:
        raise ValueError("no such day")
    return chosen, chosen + timedelta(days=2 if unit == "weekend" else 1)


_MONTH_PARTS = {
    "early": (1, 10),
    "beginning": (1, 10),
    "start": (1, 10),
    "mid": (11, 20),
    "middle": (11, 20),
    "late": (21, 31),
    "end": (21, 31),
}

Builder = Callable[[re.Match[str]], TimeWindow | None]


def _rules(r: _Resolver) -> list[tuple[re.Pattern[str], Builder]]:  # noqa: PLR0915  (one small rule per phrase reads best as a table)
    """(pattern, builder) pairs; the earliest match wins, the longest at the same place."""
    rules: list[tuple[str, Builder]] = []

    def add(pattern: str) -> Callable[[Builder], Builder]:
        def deco(fn: Builder) -> Builder:
            rules.append((pattern, fn))
            return fn

        return deco

    # --- parts of a named month: read inside that month, never relative to today ----------
    @add(
        r"\b(?:the\s+|on\s+the\s+)?" + _ORD + r"\s+(?P<unit>weekend|week|monday|tuesday|"
        r"wednesday|thursday|friday|saturday|sunday)\s+(?:of|in)\s+" + _MONTH_FULL
        + r"(?:" + _Y_SEP + _YEAR + r")?\b"
    )  # fmt: skip
    def _nth_of_month(m: re.Match[str]) -> TimeWindow | None:
        month = MONTHS[m.group("month")]
        ordinal, unit = ORDINALS[m.group("ord")], m.group("unit")
        year = r.month_year(month, m.group("y"))
        try:
            first, after = nth_in_month(year, month, ordinal, unit)
            if not m.group("y") and first > r.today:  # not yet this year: the last one
                first, after = nth_in_month(year - 1, month, ordinal, unit)
        except ValueError:
            return None
        return r.span(first, after, m.group(0))

    @add(
        r"\b(?:(?:in\s+|at\s+)?the\s+)?(?P<part>early|mid|late|beginning|start|middle|end)"
        r"(?:\s+of\s+|\s*-\s*|\s+)" + _MONTH_FULL + r"(?:" + _Y_SEP + _YEAR + r")?\b"
    )
    def _part_of_month(m: re.Match[str]) -> TimeWindow:
        month = MONTHS[m.group("month")]
        year = r.month_year(month, m.group("y"))
        lo, hi = _MONTH_PARTS[m.group("part")]
        if not m.group("y") and date(year, month, lo) > r.today:
            year -= 1
        hi = min(hi, calendar.monthrange(year, month)[1])
        return r.span(date(year, month, lo), date(year, month, hi) + timedelta(days=1), m.group(0))

    @add(
        r"\b(?:the\s+)?(?P<unit>week|weekend)\s+of\s+(?:the\s+)?" + _DAY + _DM_SEP + _MONTH
        + r"(?:" + _Y_SEP + _YEAR + r")?\b"
        r"|\b(?:the\s+)?(?P<unit2>week|weekend)\s+of\s+" + _MONTH.replace("month", "m2")
        + r"\s*(?P<d2>\d{1,2})(?:st|nd|rd|th)?(?:" + _Y_SEP + _YEAR.replace("y", "y2") + r")?\b"
    )  # fmt: skip
    def _week_of_day(m: re.Match[str]) -> TimeWindow | None:
        unit = m.group("unit") or m.group("unit2")
        month = MONTHS[m.group("month") or m.group("m2")]
        day_s = m.group("d") or m.group("d2")
        year_s = m.group("y") or m.group("y2")
        d = _date_of(r, month, int(day_s), year_s)
        if d is None:
            return None
        if unit == "week":
            return r.days(r.week_start(d), 7, m.group(0))
        # A Saturday or Sunday: its own weekend; a weekday: the weekend after it.
        sat = d + timedelta(days=5 - d.weekday())
        return r.days(sat, 2, m.group(0))

    # --- relative to today ------------------------------------------------------------------
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

    def _back(word: str) -> tuple[int, int]:
        """How many units back a count reaches, nearest and farthest ("a few": 2 to 4)."""
        return VAGUE.get(word) or (_num(word), _num(word))

    @add(r"\b" + _NUM + r"\s+days?\s+ago\b")
    def _days_ago(m: re.Match[str]) -> TimeWindow:
        near, far = _back(m.group("n"))
        return r.days(r.today - timedelta(days=far), far - near + 1, m.group(0))

    @add(r"\b" + _NUM + r"\s+weeks?\s+ago\b|\b(?P<fortnight>a|one)\s+fortnight\s+ago\b")
    def _weeks_ago(m: re.Match[str]) -> TimeWindow:
        near, far = (2, 2) if m.group("fortnight") else _back(m.group("n"))
        start = r.week_start(r.today) - timedelta(weeks=far)
        return r.days(start, 7 * (far - near + 1), m.group(0))

    @add(r"\b" + _NUM + r"\s+months?\s+ago\b")
    def _months_ago(m: re.Match[str]) -> TimeWindow:
        near, far = _back(m.group("n"))
        total = r.today.year * 12 + r.today.month - 1
        first = r.month((total - far) // 12, (total - far) % 12 + 1, m.group(0))
        last = r.month((total - near) // 12, (total - near) % 12 + 1, m.group(0))
        return TimeWindow(first.start, last.end, m.group(0))

    @add(r"\b" + _NUM + r"\s+years?\s+ago\b")
    def _years_ago(m: re.Match[str]) -> TimeWindow:
        # "two years ago" is about this date two years back: half a year either side of it
        near, far = _back(m.group("n"))
        first = r.today - timedelta(days=round(365.25 * far) + 182)
        after = min(r.today - timedelta(days=round(365.25 * near) - 183), r.today)
        return r.span(first, after + timedelta(days=1), m.group(0))

    @add(r"\b(?:the\s+)?(?P<unit>day|week|weekend|month|year)\s+before\s+last\b")
    def _before_last(m: re.Match[str]) -> TimeWindow:
        unit, label = m.group("unit"), m.group(0)
        if unit == "day":
            return r.days(r.today - timedelta(days=2), 1, label)
        if unit == "weekend":
            return r.days(r.weekend(2), 2, label)
        if unit == "week":
            return r.days(r.week_start(r.today) - timedelta(weeks=2), 7, label)
        if unit == "month":
            total = r.today.year * 12 + r.today.month - 3
            return r.month(total // 12, total % 12 + 1, label)
        return r.span(date(r.today.year - 2, 1, 1), _year_end(r.today.year - 2), label)

    @add(r"\b(?:in\s+|over\s+|during\s+)?(?:the\s+)?(?:last|past)\s+fortnight\b")
    def _last_fortnight(m: re.Match[str]) -> TimeWindow:
        return r.days(r.today - timedelta(days=13), 14, m.group(0))

    @add(r"\b(?:in\s+the\s+)?(?:last|past)\s+" + _NUM + r"\s+(?P<unit>days?|weeks?|months?)\b")
    def _last_n(m: re.Match[str]) -> TimeWindow:
        n = _back(m.group("n"))[1]
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
        return r.span(date(y, 1, 1), _year_end(y), m.group(0))

    # --- named times of a year: seasons, holidays, parts of a year, decades ---------------
    def _latest(span: yeartimes.Span, label: str) -> TimeWindow:
        return r.span(span[0], span[1], label)

    seasons = "|".join(yeartimes.SEASONS)

    @add(
        r"\b(?:(?P<which>last|this|past|previous)\s+(?P<s1>" + seasons + r")\b"
        r"|(?:(?:in|during|over)\s+)?(?:the\s+)?(?P<s2>" + seasons + r")(?:\s+of)?\s*,?\s+"
        + _YEAR + r"\b)"
    )  # fmt: skip
    def _season(m: re.Match[str]) -> TimeWindow | None:
        # "during the summer" with no year and no last/this is left unresolved: in "we always
        # go north during the summer" it is a habit, not one summer
        word = m.group("s1") or m.group("s2")
        which = m.group("which")
        if m.group("y"):
            span = yeartimes.season(word, int(m.group("y")), r.zone)
        elif which == "this":
            span = yeartimes.this_season(word, r.today, r.zone)
        else:
            ended = which is not None  # "last summer" is over; "in the summer" has begun
            span = yeartimes.latest_season(word, r.today, r.zone, ended=ended)
        return _latest(span, m.group(0))

    holidays = r"christmas\s+eve|christmas\s+day|christmas|xmas|new\s+year(?:'?s)?\s+eve|"
    holidays += r"new\s+year(?:'?s)?(?:\s+day)?|halloween|valentine'?s(?:\s+day)?|"
    holidays += r"easter(?:\s+(?:sunday|weekend))?|thanksgiving"

    @add(
        r"\b(?:(?:on|at|over|around|for|during)\s+)?(?P<which>last\s+|this\s+)?"
        r"(?P<h>" + holidays + r")\b(?:" + _Y_SEP + _YEAR + r"\b)?"
    )
    def _holiday(m: re.Match[str]) -> TimeWindow | None:
        if not m.group("y") and not m.group("which"):
            # "what do we eat at Thanksgiving?" asks about every one: no window of one year
            return None
        said = re.sub(r"\s+", " ", m.group("h")).replace("xmas", "christmas")
        said = re.sub(r"new years?'?s?", "new year's", said).replace("valentines", "valentine's")
        name = said.split()[0] if said.startswith(("easter", "thanksgiving")) else said
        if name == "new year's":
            name = "new year's day"
        if name == "valentine's":
            name = "valentine's day"
        if m.group("y"):
            span = yeartimes.holiday(name, int(m.group("y")))
        else:  # "last Christmas" is over; "this Christmas" is this year's
            span = yeartimes.latest_holiday(name, r.today)
            if m.group("which").strip() == "last" and span[1] > r.today:
                span = yeartimes.holiday(name, span[0].year - 1)
        return _latest(span, m.group(0))

    parts = "|".join(sorted(yeartimes.YEAR_PARTS, key=len, reverse=True)).replace(" ", r"\s+")

    @add(
        r"\b(?:(?:in|during|at|by)\s+)?(?:the\s+)?(?P<part>" + parts + r")"
        r"(?:\s+of\s+|\s*-\s*|\s+)(?:" + _YEAR + r"|(?P<rel>this|last)\s+year|the\s+year)\b"
    )
    def _year_part(m: re.Match[str]) -> TimeWindow:
        part = re.sub(r"\s+", " ", m.group("part").lower())
        year = int(m.group("y")) if m.group("y") else r.today.year - (m.group("rel") == "last")
        return _latest(yeartimes.year_part(part, year), m.group(0))

    @add(
        r"\b(?:(?:in|during)\s+)?(?:the\s+)?(?:(?P<cent>19|20)(?P<tens>\d)0'?s"
        r"|'?(?P<short>\d)0'?s|(?P<word>" + "|".join(yeartimes.DECADE_WORDS) + r"))\b"
    )
    def _decade(m: re.Match[str]) -> TimeWindow | None:
        if m.group("cent") and m.group("tens") == "0":  # "the 1900s": the century
            return r.span(
                date(int(m.group("cent")) * 100, 1, 1),
                date(int(m.group("cent")) * 100 + 100, 1, 1),
                m.group(0),
            )
        if m.group("cent"):
            first = int(m.group("cent") + m.group("tens") + "0")
        else:
            if m.group("word") and not m.group(0).lower().lstrip().startswith(("in", "the")):
                return None  # "twenties" alone is more often an age
            tens = (
                int(m.group("short"))
                if m.group("short")
                else yeartimes.DECADE_WORDS[m.group("word").lower()]
            )
            first = 2000 + 10 * tens
            if first > r.today.year:
                first -= 100
        return _latest(yeartimes.decade(first), m.group(0))

    # --- calendar dates -----------------------------------------------------------------------
    @add(
        r"\b(?:between|from)\s+" + _MONTH_FULL.replace("month", "m1")
        + r"(?:" + _Y_SEP + _YEAR.replace("y", "y1") + r")?"
        r"\s+(?:and|to|until|till|through|thru|-)\s+" + _MONTH_FULL.replace("month", "m2")
        + r"(?:" + _Y_SEP + _YEAR.replace("y", "y2") + r")?\b(?!\s*-?\s*\d{1,2}\b)"
    )  # fmt: skip
    def _month_range(m: re.Match[str]) -> TimeWindow | None:
        # "between March and May 2025": the three months, not May alone
        first_month, last_month = MONTHS[m.group("m1")], MONTHS[m.group("m2")]
        last_year = int(m.group("y2")) if m.group("y2") else r.month_year(last_month, None)
        first_year = int(m.group("y1")) if m.group("y1") else last_year - (first_month > last_month)
        first = r.month(first_year, first_month, m.group(0))
        last = r.month(last_year, last_month, m.group(0))
        if first.start >= last.end:
            return None
        return TimeWindow(first.start, last.end, m.group(0))

    @add(
        r"\b(?:on\s+)?(?:" + _WD.replace("(?P<wd>", "(?:") + r",?\s+)?the\s+" + _DAY
        + r"(?<![0-9])(?=\s*$|\s*[?!.,;:)]|\s+(?:at|in|and|or|when|while|before|after|"
        r"this|last|i|we|you|he|she|they|my|our)\b)"
    )  # fmt: skip
    # "on the 3rd?" or "on the 3rd at noon", never "the 3rd floor" or "the 3rd of May"
    def _day_of_month(m: re.Match[str]) -> TimeWindow | None:
        # "on the 3rd": the latest 3rd of a month, up to today
        day = int(m.group("d"))
        if not 1 <= day <= 31:
            return None
        year, month = r.today.year, r.today.month
        for _ in range(13):
            if day <= calendar.monthrange(year, month)[1] and date(year, month, day) <= r.today:
                return r.days(date(year, month, day), 1, m.group(0))
            year, month = (year - 1, 12) if month == 1 else (year, month - 1)
        return None

    @add(
        r"(?<![\d.])\b(?P<a>\d{1,2})(?P<sep>[/.-])(?P<b>\d{1,2})(?P=sep)"
        r"(?P<y>(?:19|20)\d{2}|(?<=/)\d{2})\b(?![/.-]\d)"
    )  # a two-digit year only after a slash: "3.11.25" is more often a version
    def _numeric(m: re.Match[str]) -> TimeWindow | None:
        # 14/06/2025 is day first, 06/14/2025 month first; when both could be, the zone says
        a, b, y = int(m.group("a")), int(m.group("b")), int(m.group("y"))
        year = y if y > 99 else 2000 + y
        month_first = b > 12 or (a <= 12 and _month_first(r.zone))
        month, day = (a, b) if month_first else (b, a)
        try:
            return r.days(date(year, month, day), 1, m.group(0))
        except ValueError:
            return None

    @add(r"\b(?P<y>\d{4})[-/.](?P<mo>\d{1,2})[-/.](?P<d>\d{1,2})\b")
    def _iso(m: re.Match[str]) -> TimeWindow | None:
        try:
            d = date(int(m.group("y")), int(m.group("mo")), int(m.group("d")))
        except ValueError:
            return None
        return r.days(d, 1, m.group(0))

    def _dated(
        month: int, day: int, year: str | None, label: str, weekday: str | None = None
    ) -> TimeWindow | None:
        d = _date_of(r, month, day, year)
        if d is not None and weekday and not year:
            # "Sunday the 12th of October": the latest 12 October that was a Sunday
            want = WEEKDAYS[weekday.lower()]
            for back in range(8):
                try:
                    earlier = d.replace(year=d.year - back)
                except ValueError:
                    continue
                if earlier.weekday() == want:
                    d = earlier
                    break
        return None if d is None else r.days(d, 1, label)

    @add(
        r"\b(?:between|from)\s+(?:the\s+)?(?P<d1>\d{1,2})(?:st|nd|rd|th)?\s+(?:and|to|until|-)\s+"
        r"(?:the\s+)?" + _DAY + _DM_SEP + _MONTH + r"(?:" + _Y_SEP + _YEAR + r")?\b"
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

    said_weekday = r"(?:" + _WD.replace("wd>", "dw>") + r",?\s+(?:the\s+)?)?"

    @add(r"\b" + said_weekday + _DAY + _DM_SEP + _MONTH + r"(?:" + _Y_SEP + _YEAR + r")?\b")
    def _day_month(m: re.Match[str]) -> TimeWindow | None:
        month, day = MONTHS[m.group("month")], int(m.group("d"))
        return _dated(month, day, m.group("y"), m.group(0), m.group("dw"))

    @add(r"\b" + said_weekday + _MONTH + r"\s*-?\s*" + _DAY + r"(?:" + _Y_SEP + _YEAR + r")?\b")
    def _month_day(m: re.Match[str]) -> TimeWindow | None:
        month, day = MONTHS[m.group("month")], int(m.group("d"))
        return _dated(month, day, m.group("y"), m.group(0), m.group("dw"))

    @add(r"\b(?:(?:in|during|of)\s+)?" + _MONTH + r"(?:" + _Y_SEP + _YEAR + r")\b")
    def _month_year(m: re.Match[str]) -> TimeWindow:
        return r.month(int(m.group("y")), MONTHS[m.group("month")], m.group(0))

    @add(r"\b(?:in|during|of)\s+" + _MONTH_FULL + r"\b(?!\s*-?\s*\d)")  # not "of May 3"
    def _in_month(m: re.Match[str]) -> TimeWindow:
        month = MONTHS[m.group("month")]
        return r.month(r.month_year(month, None), month, m.group(0))

    @add(r"\b(?:in|during|of|since|before|after|until|till|by|to|at)\s+" + _YEAR + r"\b")
    def _in_year(m: re.Match[str]) -> TimeWindow:
        y = int(m.group("y"))
        return r.span(date(y, 1, 1), _year_end(y), m.group(0))

    @add(r"\b(?P<which>last|this|past|previous|on)?\s*" + _WD + _PART + r"\b" + _DATE_AFTER)
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


_MONTH_FIRST_ZONES = (
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
    "America/Phoenix", "America/Anchorage", "America/Detroit", "America/Boise",
    "America/Indiana/", "America/Kentucky/", "America/North_Dakota/", "America/Juneau",
    "America/Adak", "America/Menominee", "America/Nome", "America/Sitka", "Pacific/Honolulu",
    "US/", "America/Puerto_Rico", "Pacific/Guam", "Asia/Manila",
)  # fmt: skip
"""Zones where 06/07/2025 is read month first (the United States, the Philippines)."""


def _month_first(zone: str) -> bool:
    return zone.startswith(_MONTH_FIRST_ZONES)


def _date_of(r: _Resolver, month: int, day: int, year: str | None) -> date | None:
    """A day of a named month; without a year, the latest such day not after today."""
    y = int(year) if year else r.today.year
    try:
        d = date(y, month, day)
    except ValueError:
        return None
    if not year and d > r.today:
        try:
            d = d.replace(year=y - 1)
        except ValueError:  # 29 February
            return None
    return d


@dataclass(frozen=True, slots=True)
class TimeParse:
    """What the time words of a question resolved to."""

    window: TimeWindow | None
    unresolved: str | None = None
    """A phrase that names a time we cannot resolve ("the day before my birthday")."""
    rest: str = ""
    """The question with the time words taken out (for topic matching)."""
    event: str = ""
    """The event an unresolved phrase hangs on ("move" in "after the move"): a soft hint."""


_DATED = re.compile(
    r"\b(?:(?P<d1>\d{1,2})(?:st|nd|rd|th)?" + _DM_SEP + _MONTH.replace("month", "m1")
    + r"|" + _MONTH.replace("month", "m2") + r"\s*(?P<d2>\d{1,2})(?:st|nd|rd|th)?)"
    + _Y_SEP + r"(?P<y>(?:19|20)\d{2})\b"
)  # fmt: skip
"""A calendar date with its year ("23 January, 2022", "August 3, 2023", "May 3,2024")."""
_HOLDING = re.compile(r"\b(?:week|weekend)\s+of\s+(?:the\s+)?$")
"""'the week of 3 May': the week holding that day, not a week before it."""
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
    if m is None or _HOLDING.search(lowered[: m.start()]):
        return None
    if _RANGE_JOIN.match(lowered, m.end()) or _JOINED.search(lowered, 0, m.start()):
        return None  # one end of a range ("March 1, 2024 to March 31"): see _through
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
    relative = _resolve(rest, end - timedelta(seconds=1), tz)
    if relative.window is None:
        return None
    window = TimeWindow(
        min(relative.window.start, r.at(day)), end, f"{relative.window.label} ({m.group(0)})"
    )
    return TimeParse(window, None, relative.rest)


def _event_words(phrase: re.Match[str]) -> str:
    """The event's own words ("the big move" -> "big move"), for a soft topic hint."""
    raw = phrase.group("e1") or phrase.group("e2") or phrase.group("e3") or ""
    words = [w for w in re.findall(r"[a-z][a-z'-]*", raw.lower()) if w not in _EVENT_STOP]
    return " ".join(words)


def parse_time(text: str, now: datetime, tz: ZoneInfo) -> TimeParse:
    """Find the time expression in ``text`` and resolve it; see the module doc."""
    lowered = text.lower()
    bad = UNRESOLVED.search(lowered)
    if bad is None:
        return _resolve(lowered, now, tz)
    phrase = bad.group(0).strip()
    event = _event_words(bad)
    # The event's words stay in the question: they are its topic ("during the charity event").
    rest = lowered.replace(bad.group(0), f" {event} ")
    dated = _resolve(rest, now, tz)
    if dated.window is None:
        return TimeParse(None, phrase, rest, event)
    # "after the meeting yesterday": the event happened inside the dated window, so the
    # time asked about lies inside the window widened on the side the phrase points to.
    window = _around_event(phrase, dated.window, _Resolver(now, tz))
    return TimeParse(window, None, dated.rest, event)


_EVENT_SIDE = re.compile(r"\b(?P<dir>before|after|since|until|till)\b")
_EVENT_UNIT = {"day": 1, "night": 1, "morning": 1, "evening": 1, "week": 7, "weekend": 7}


def _around_event(phrase: str, window: TimeWindow, r: _Resolver) -> TimeWindow:
    """The window of an event phrase whose event is dated by ``window`` (see parse_time)."""
    side = _EVENT_SIDE.search(phrase)
    direction = side.group("dir") if side else "during"
    first = phrase.removeprefix("the ").split(maxsplit=1)[0]
    reach = timedelta(days=_EVENT_UNIT.get(first, 31 if first in ("month", "year") else 0))
    label = f"{phrase} ({window.label})"
    if direction == "since" or (direction == "after" and not reach):
        return TimeWindow(window.start, max(window.end, r.at(r.today + timedelta(days=1))), label)
    if direction == "after":
        return TimeWindow(window.start, window.end + reach, label)
    if direction in ("before", "until", "till"):
        return TimeWindow(window.start - (reach or window.end - window.start), window.end, label)
    return TimeWindow(window.start, window.end, label)


_LEADING = re.compile(r"^(?:of|since|before|after|until|till|by|to|at)\s+")
"""A bound word a rule took as its own ("of May 2024", "since 2019")."""
_SINCE = re.compile(r"\b(?:since|ever\s+since|from)\s*$")
_UP_TO = re.compile(r"\b(?:as\s+(?:of|at)|by|until|till|til|up\s+(?:un)?til|up\s+to)\s*$")
_BEFORE_AFTER = re.compile(r"\b(?P<dir>before|prior\s+to|after)\s*$")
_UNIT_BESIDE = re.compile(
    r"\b(?:the\s+|a\s+)?(?:" + _NUM + r"\s+)?(?P<unit>days?|weeks?|weekends?|months?)\s+"
    r"(?P<dir>before|after)\s*$"
)
"""'the week after New Year': that week, beside the named time, not all time after it."""


def _resolve(lowered: str, now: datetime, tz: ZoneInfo) -> TimeParse:
    """The resolvable time of ``lowered`` (no event phrases): see the module doc."""
    anchored = _anchored(lowered, now, tz)
    if anchored is not None and anchored.window is not None and anchored.window.start <= now:
        return anchored
    resolver = _Resolver(now, tz)
    rules = _rules(resolver)
    best: tuple[int, int, TimeWindow, str] | None = None
    for pattern, build in rules:
        for m in pattern.finditer(lowered):
            window = build(m)
            if window is None:
                continue
            key = (m.start(), -len(m.group(0)))
            if best is None or key < (best[0], best[1]):
                best = (m.start(), -len(m.group(0)), window, m.group(0))
            break
    if best is None:
        return TimeParse(None, None, lowered)
    at, _, window, label = best
    ranged = _through(lowered, at, label, window, rules)
    if ranged is not None:
        at, label, window = ranged
    head = lowered[:at]
    lead = _LEADING.match(label)
    core = label
    if lead is not None:
        # "as of May 2024": the month rule took the "of" a bound word needs
        head, core = head + lead.group(0), label[lead.end() :]
    bounded = _bounded(head, window, core, resolver)
    if bounded is not None:
        return TimeParse(bounded, None, lowered.replace(bounded.label, " "))
    if window.start > now:
        return TimeParse(None, f"{label} (that is in the future)", lowered)
    return TimeParse(window, None, lowered.replace(label, " "))


_RANGE_JOIN = re.compile(r"\s*(?:to|until|till|til|through|thru|-|\u2013|and)\s+")
_RANGE_OPEN = re.compile(r"\b(?P<word>from|between)\s+$")
_JOINED = re.compile(r"\d\s*(?:to|until|till|til|through|thru|-|\u2013|and)\s+$")
"""The end of a range's first time, just before its second one."""


def _through(
    lowered: str,
    at: int,
    label: str,
    window: TimeWindow,
    rules: list[tuple[re.Pattern[str], Builder]],
) -> tuple[int, str, TimeWindow] | None:
    """A range of two named times ("2024-03-01 to 2024-03-31", "between May 1 and May 9").

    The window runs from the first time (at ``at``) to the end of the second, when one follows
    the joining word at once; said backwards, the same days. "and" joins only after
    "between": "on Monday and what Rui said" is Monday alone. (at, label, window), or None.
    """
    join = _RANGE_JOIN.match(lowered, at + len(label))
    if join is None:
        return None
    opener = _RANGE_OPEN.search(lowered, 0, at)
    if join.group(0).strip() == "and" and (opener is None or opener.group("word") != "between"):
        return None
    end: tuple[int, TimeWindow] | None = None
    for pattern, build in rules:
        m = pattern.match(lowered, join.end())
        if m is None or (end is not None and m.end() <= end[0]):
            continue
        second = build(m)
        if second is not None:
            end = (m.end(), second)
    if end is None:
        return None
    start = opener.start() if opener is not None else at
    text = lowered[start : end[0]]
    second = end[1]
    # Said backwards ("the 31st to the 1st"): the same days.
    first_start = min(window.start, second.start)
    return start, text, TimeWindow(first_start, max(window.end, second.end), text)


def _beside(beside: re.Match[str], window: TimeWindow, label: str, to_now: datetime) -> TimeWindow:
    """A unit beside a named time ("the week after"): that many days, on the side said."""
    count = _num(beside.group("n")) if beside.group("n") else 1
    reach = timedelta(days=count * _SPAN_DAYS.get(beside.group("unit").rstrip("s"), 7))
    label = beside.group(0) + label
    if beside.group("dir") == "after":
        return TimeWindow(window.end, min(window.end + reach, to_now), label)
    return TimeWindow(window.start - reach, window.start, label)


def _bounded(head: str, window: TimeWindow, label: str, r: _Resolver) -> TimeWindow | None:
    """The window a bound word before the time makes of it ("since", "as of", "before")."""
    to_now = r.at(r.today + timedelta(days=1))
    since = _SINCE.search(head)
    if since is not None and window.start <= r.now:
        # "since Monday" runs from Monday to now, not Monday alone
        return TimeWindow(window.start, to_now, since.group(0) + label)
    up_to = _UP_TO.search(head)
    if up_to is not None:
        # "as of May 2024": what held up to the end of May, from whenever it began
        return TimeWindow(OPEN_START, window.end, up_to.group(0) + label, open_start=True)
    beside = _UNIT_BESIDE.search(head)
    if beside is not None:
        return _beside(beside, window, label, to_now)
    return _edge(head, window, label, r.now, to_now)


def _edge(
    head: str, window: TimeWindow, label: str, now: datetime, to_now: datetime
) -> TimeWindow | None:
    """A time said with "before" runs up to its start; with "after", from its end to today."""
    edge = _BEFORE_AFTER.search(head)
    if edge is None or (edge.group("dir") == "after" and window.end > now):
        return None
    if edge.group("dir") == "after":
        return TimeWindow(window.end, to_now, edge.group(0) + label)
    return TimeWindow(OPEN_START, window.start, edge.group(0) + label, open_start=True)


_MENTION_HINT = re.compile(
    r"\b(?:yesterday|today|tonight|last|ago|week|weekend|month|year|fortnight|(?:19|20)\d\d|"
    r"spring|summer|autumn|fall|winter|christmas|xmas|easter|thanksgiving|halloween|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",
    re.IGNORECASE,
)


def mentioned_span(text: str, said_at: float) -> tuple[float, float] | None:
    """The past time a message talks about, resolved against when it was said (UTC).

    "We went camping last weekend", said on Monday 10 July, talks about 8-9 July. Used at
    index time so that a question about a date also finds what was said about it later.
    Open windows ("as of May") name no time of their own and are left out.
    """
    if not _MENTION_HINT.search(text):
        return None
    now = datetime.fromtimestamp(said_at, UTC)
    parsed = parse_time(text, now, ZoneInfo("UTC"))
    window = parsed.window
    if window is None or window.open_start:
        return None
    return window.start.timestamp(), window.end.timestamp()
