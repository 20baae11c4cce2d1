"""Date phrases as classes (issue 30): each class is checked on many generated instances.

Every instance is built from a template x month x year x wording, and its expected window is
computed here by a separate route (``calendar.monthcalendar``, plain date arithmetic), so a
rule that works for the issue's examples but not for the class fails. Counts of instances
per class are printed with ``-s``.
"""

from __future__ import annotations

import calendar
import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.agent.retrieval.query import understand
from bot.agent.retrieval.timeparse import OPEN_START, TimeParse, parse_time

ZONES = [ZoneInfo("Europe/Lisbon"), ZoneInfo("America/New_York"), ZoneInfo("Asia/Tokyo")]
NOWS = [datetime(2026, 3, 10, 12, tzinfo=UTC), datetime(2025, 8, 2, 23, 30, tzinfo=UTC)]
"""Two todays: a window anchored to a named month must not move with either."""
YEARS = [2019, 2022, 2024]
MONTH_NAMES = list(calendar.month_name)[1:]
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1, "2nd": 2, "1st": 1}
WEEKDAYS = list(calendar.day_name)


def local_days(parsed: TimeParse, tz: ZoneInfo) -> tuple[date, date]:
    """(first day, last day) of the parsed window in the user's zone."""
    assert parsed.window is not None
    first = parsed.window.start.astimezone(tz).date()
    last = (parsed.window.end - timedelta(seconds=1)).astimezone(tz).date()
    return first, last


def expected_nth(year: int, month: int, ordinal: int, unit: str) -> tuple[date, date] | None:
    """The oracle: from calendar.monthcalendar, not from the parser's own arithmetic."""
    weeks = calendar.monthcalendar(year, month)
    if unit == "week":
        length = calendar.monthrange(year, month)[1]
        if ordinal == -1:
            return date(year, month, length - 6), date(year, month, length)
        lo = 7 * (ordinal - 1) + 1
        return date(year, month, lo), date(year, month, min(lo + 6, length))
    column = 5 if unit == "weekend" else WEEKDAYS.index(unit.capitalize())
    days = [w[column] for w in weeks if w[column]]
    if ordinal > len(days):
        return None
    d = date(year, month, days[ordinal - 1 if ordinal > 0 else -1])
    return d, d + timedelta(days=1 if unit == "weekend" else 0)


NTH_FORMS = [
    "What did I do {the}{o} {u} of {m} {y}?",
    "Where was Ana on the {o} {u} in {m}, {y}",
    "tell me about {the}{o} {u} of {m} {y} please",
]


@pytest.mark.parametrize("unit", ["weekend", "week", *(d.lower() for d in WEEKDAYS)])
def test_a_part_of_a_named_month_is_read_inside_that_month(unit: str) -> None:
    checked = 0
    for (word, n), month, year, form, now in itertools.product(
        ORDINALS.items(), range(1, 13), YEARS, NTH_FORMS, NOWS
    ):
        want = expected_nth(year, month, n, unit)
        if want is None:
            continue
        tz = ZONES[checked % len(ZONES)]
        text = form.format(the="the " if checked % 2 else "", o=word, u=unit,
                           m=MONTH_NAMES[month - 1], y=year)  # fmt: skip
        parsed = parse_time(text, now, tz)
        assert parsed.window is not None, text
        assert local_days(parsed, tz) == want, (text, now)
        checked += 1
    print(f"{unit}: {checked} phrases")
    assert checked >= 400


@pytest.mark.parametrize(
    ("now", "month"),
    [(datetime(2026, 3, 10, 12, tzinfo=UTC), m) for m in range(1, 13)],
)
def test_without_a_year_the_latest_such_part_not_after_today(now: datetime, month: int) -> None:
    tz = ZoneInfo("Europe/Lisbon")
    today = now.astimezone(tz).date()
    for (word, n), unit in itertools.product(ORDINALS.items(), ["weekend", "week", "monday"]):
        text = f"what happened the {word} {unit} of {MONTH_NAMES[month - 1]}"
        year = today.year
        want = expected_nth(year, month, n, unit)
        if want is None or want[0] > today:
            want = expected_nth(year - 1, month, n, unit)
        if want is None:
            continue
        assert local_days(parse_time(text, now, tz), tz) == want, text


@pytest.mark.parametrize(
    ("part", "days"),
    [("early", (1, 10)), ("the beginning of", (1, 10)), ("mid", (11, 20)),
     ("mid-", (11, 20)), ("the middle of", (11, 20)), ("late", (21, 31)),
     ("the end of", (21, 31))],
)  # fmt: skip
def test_early_mid_and_late_in_a_named_month(part: str, days: tuple[int, int]) -> None:
    tz = ZoneInfo("Europe/Lisbon")
    for month, year, now in itertools.product(range(1, 13), YEARS, NOWS):
        sep = "" if part.endswith("-") else " "
        text = f"what did Rui do in {part}{sep}{MONTH_NAMES[month - 1]} {year}?"
        last = min(days[1], calendar.monthrange(year, month)[1])
        want = (date(year, month, days[0]), date(year, month, last))
        assert local_days(parse_time(text, now, tz), tz) == want, text


def _named_times() -> list[tuple[str, date, date]]:
    """(words, first day, last day) of named times in several forms."""
    out = []
    for month, year in itertools.product(range(1, 13), YEARS):
        name = MONTH_NAMES[month - 1]
        last = calendar.monthrange(year, month)[1]
        out.append((f"{name} {year}", date(year, month, 1), date(year, month, last)))
        day = 1 + (month * 7 + year) % 28
        d = date(year, month, day)
        out.append((f"{name} {day}, {year}", d, d))
        out.append((f"{day} {name} {year}", d, d))
    out += [(f"{y}", date(y, 1, 1), date(y, 12, 31)) for y in YEARS]
    return out


@pytest.mark.parametrize("bound", ["as of", "by", "until", "up to", "as at", "till"])
def test_as_of_a_named_time_runs_up_to_its_end(bound: str) -> None:
    tz = ZoneInfo("America/New_York")
    now = NOWS[0]
    checked = 0
    for words, _first, last in _named_times():
        if bound != "as of" and words.isdigit():
            continue  # "by 2024" is a number as often as a year
        text = f"Where did Ana live {bound} {words}?"
        parsed = parse_time(text, now, tz)
        assert parsed.window is not None, text
        assert parsed.window.open_start and parsed.window.start == OPEN_START, text
        assert (parsed.window.end - timedelta(seconds=1)).astimezone(tz).date() == last, text
        # ... and not "in" that time: the same words with "in" are the time alone
        inside = parse_time(f"Where did Ana live in {words}?", now, tz)
        assert inside.window is not None and not inside.window.open_start, words
        checked += 1
    assert checked >= 70


def test_before_and_after_a_named_time() -> None:
    tz = ZoneInfo("Europe/Lisbon")
    now = NOWS[0]
    for words, first, last in _named_times():
        before = parse_time(f"what did I read before {words}", now, tz)
        assert before.window is not None and before.window.open_start, words
        assert before.window.end.astimezone(tz).date() == first, words
        after = parse_time(f"what did I read after {words}", now, tz)
        assert after.window is not None, words
        assert after.window.start.astimezone(tz).date() == last + timedelta(days=1), words
        assert after.window.end.astimezone(tz).date() == now.astimezone(tz).date() + timedelta(1)


def _punctuated(d: date) -> list[str]:
    """One calendar date written in the ways people type it."""
    mon, abbr = MONTH_NAMES[d.month - 1], MONTH_NAMES[d.month - 1][:3]
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(d.day if d.day < 20 else d.day % 10, "th")
    return [
        f"{mon} {d.day},{d.year}",
        f"{mon} {d.day} ,{d.year}",
        f"{mon} {d.day} , {d.year}",
        f"{mon} {d.day}{suffix},{d.year}",
        f"{abbr}. {d.day},{d.year}",
        f"{abbr} {d.day}{suffix}, {d.year}",
        f"{d.day} {mon},{d.year}",
        f"{d.day}{suffix} of {mon},{d.year}",
        f"{d.day}-{abbr}-{d.year}",
        f"{d.day} {abbr}. {d.year}",
        f"{d.year}-{d.month:02d}-{d.day:02d}",
        f"{d.year}/{d.month}/{d.day}",
    ]


def test_punctuation_variants_keep_their_year() -> None:
    tz = ZoneInfo("Asia/Tokyo")
    checked = 0
    for year, month in itertools.product([2018, 2021, 2023, 2024], range(1, 13)):
        d = date(year, month, 1 + (3 * month + year) % 28)
        for words, now in itertools.product(_punctuated(d), NOWS):
            text = f"What did Joanna say on {words}?"
            assert local_days(parse_time(text, now, tz), tz) == (d, d), text
            checked += 1
    assert checked >= 1000


def test_relative_times_count_from_a_named_date_in_any_punctuation() -> None:
    tz = ZoneInfo("UTC")
    for year, month in itertools.product([2022, 2023], range(1, 13)):
        d = date(year, month, 15)
        for words in _punctuated(d)[:10]:
            text = f"What happened the week before {words}?"
            got = local_days(parse_time(text, NOWS[0], tz), tz)
            assert got == (d - timedelta(days=7), d), text


EVENTS = ["move", "wedding", "road trip", "surgery", "new job", "concert", "big game",
          "charity race", "funeral", "holidays", "interview", "party"]  # fmt: skip
OWNERS = ["my", "the", "our", "her", "Ana's", "their"]


@pytest.mark.parametrize("link", ["after", "since", "before", "during", "the day after",
                                  "the week before", "the weekend after"])  # fmt: skip
def test_a_time_tied_to_an_event_is_a_soft_hint_and_keeps_the_topic(link: str) -> None:
    tz = ZoneInfo("Europe/Lisbon")
    checked = 0
    for event, owner in itertools.product(EVENTS, OWNERS):
        text = f"Which restaurant did we try {link} {owner} {event}?"
        plan = understand(text, NOWS[0], tz)
        assert plan.window is None, text
        assert plan.unresolved is not None and event.split()[-1] in plan.unresolved, text
        # the topic and the event's own words are still searched
        assert "restaurant" in plan.terms, (text, plan.terms)
        assert event.split()[-1] in plan.terms, (text, plan.terms)
        checked += 1
    assert checked == len(EVENTS) * len(OWNERS)


@pytest.mark.parametrize(
    "clause",
    ["since I moved to Porto", "after we got married", "since she started her new job",
     "before they left for Brazil", "after Ana adopted the puppy", "since I quit smoking"],
)  # fmt: skip
def test_an_event_said_as_a_clause_is_a_soft_hint_too(clause: str) -> None:
    tz = ZoneInfo("Europe/Lisbon")
    plan = understand(f"how often did I cook {clause}?", NOWS[1], tz)
    assert plan.window is None and plan.unresolved is not None
    assert "cook" in plan.terms


@pytest.mark.parametrize(
    ("dated", "start_days_back"),
    [("yesterday", 1), ("last week", None), ("in March 2024", None)],
)
def test_an_event_with_a_date_beside_it_keeps_that_date(
    dated: str, start_days_back: int | None
) -> None:
    tz = ZoneInfo("Europe/Lisbon")
    now = NOWS[0]
    for event in EVENTS:
        text = f"what did I eat during the {event} {dated}?"
        alone = parse_time(f"what did I eat {dated}?", now, tz)
        parsed = parse_time(text, now, tz)
        assert parsed.window is not None and alone.window is not None, text
        assert (parsed.window.start, parsed.window.end) == (alone.window.start, alone.window.end)


def test_relative_phrases_without_a_named_month_still_count_from_today() -> None:
    tz = ZoneInfo("Europe/Lisbon")
    for now in NOWS:
        today = now.astimezone(tz).date()
        got = local_days(parse_time("what did I do last week?", now, tz), tz)
        monday = today - timedelta(days=today.weekday() + 7)
        assert got == (monday, monday + timedelta(days=6))
        got = local_days(parse_time("the second Friday", now, tz), tz)  # no month: a weekday
        assert got[0].weekday() == 4 and got[0] <= today


def test_the_week_and_the_weekend_of_a_named_day() -> None:
    tz = ZoneInfo("Europe/Lisbon")
    for day in range(1, 29):
        d = date(2024, 5, day)
        week = local_days(parse_time(f"the week of {day} May 2024", NOWS[0], tz), tz)
        assert week[0] == d - timedelta(days=d.weekday()) and (week[1] - week[0]).days == 6
        weekend = local_days(parse_time(f"the weekend of May {day}, 2024", NOWS[0], tz), tz)
        assert weekend[0].weekday() == 5 and (weekend[1] - weekend[0]).days == 1
        assert abs((weekend[0] - d).days) <= 5


RANGE_FORMS = [
    "{a} to {b}",
    "from {a} to {b}",
    "what did I do between {a} and {b}?",
    "show my stress {a} until {b}",
    "{a} through {b}",
    "{a} - {b}",
]
"""A range of two named days: both days and every day between, not the first day alone."""


def day_words(d: date) -> list[str]:
    """The ways a person writes one past day."""
    month = calendar.month_name[d.month]
    return [d.isoformat(), f"{month} {d.day}, {d.year}", f"{d.day} {month} {d.year}"]


def test_a_range_of_two_days_covers_both_and_all_between() -> None:
    count = 0
    for now, tz in itertools.product(NOWS, ZONES):
        for first, length in (
            (date(2024, 3, 1), 31),
            (date(2023, 12, 28), 9),
            (date(2022, 2, 27), 3),
        ):
            last = first + timedelta(days=length - 1)
            for form, a, b in itertools.product(RANGE_FORMS, day_words(first), day_words(last)):
                text = form.format(a=a, b=b)
                parsed = parse_time(text, now, tz)
                assert parsed.window is not None, text
                assert local_days(parsed, tz) == (first, last), text
                count += 1
    print(f"{count} ranges")


def test_a_range_said_backwards_is_the_same_days_and_and_alone_joins_nothing() -> None:
    now, tz = NOWS[0], ZONES[0]
    backwards = parse_time("2024-03-31 to 2024-03-01", now, tz)
    assert local_days(backwards, tz) == (date(2024, 3, 1), date(2024, 3, 31))
    # Words after "and" that name no time leave the first day alone, as before.
    alone = parse_time("what did I eat on 2024-03-01 and what did Rui say", now, tz)
    assert local_days(alone, tz) == (date(2024, 3, 1), date(2024, 3, 1))
