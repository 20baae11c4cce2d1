"""More date phrase classes (issue 30): named times of a year and the vaguer relative ones.

Found by trying wordings the first classes did not cover: "the weekend before last" was read
as this weekend, "on Sunday the 12th of October" as last Sunday and "between March and May
2025" as May alone (each a hard filter that hid the evidence), while seasons, holidays,
quarters, decades, "a fortnight ago", "two years ago", "on the 3rd" and 14/06/2025 were not
read at all. As in ``test_timeparse_classes``, every class is checked on generated instances
against an oracle that reaches the answer by another route (walking the calendar day by day,
``calendar.monthcalendar``, a table of known Easter Sundays).
"""

from __future__ import annotations

import calendar
import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.agent.retrieval.timeparse import TimeParse, parse_time

LISBON, NEW_YORK, SYDNEY = (
    ZoneInfo("Europe/Lisbon"),
    ZoneInfo("America/New_York"),
    ZoneInfo("Australia/Sydney"),
)
TODAYS = [date(2026, 11, 28) + timedelta(days=37 * i) for i in range(-24, 2)]
"""Two years of todays, every day of the week and month among them."""
YEARS = [2019, 2022, 2024, 2025]
NORTH_MONTHS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "autumn": (9, 10, 11),
                "fall": (9, 10, 11), "winter": (12, 1, 2)}  # fmt: skip
SOUTH_MONTHS = {"spring": (9, 10, 11), "summer": (12, 1, 2), "autumn": (3, 4, 5),
                "fall": (3, 4, 5), "winter": (6, 7, 8)}  # fmt: skip


def at(d: date, tz: ZoneInfo) -> datetime:
    """Noon of ``d`` in ``tz``: the "now" of a question asked that day."""
    return datetime(d.year, d.month, d.day, 12, tzinfo=tz).astimezone(UTC)


def days(parsed: TimeParse, tz: ZoneInfo) -> tuple[date, date]:
    """(first day, last day) of the parsed window in the user's zone."""
    assert parsed.window is not None, parsed
    first = parsed.window.start.astimezone(tz).date()
    return first, (parsed.window.end - timedelta(seconds=1)).astimezone(tz).date()


def run_of(d: date, months: tuple[int, ...]) -> tuple[date, date]:
    """The whole run of consecutive days around ``d`` whose month is one of ``months``."""
    first, last = d, d
    while (first - timedelta(days=1)).month in months:
        first -= timedelta(days=1)
    while (last + timedelta(days=1)).month in months:
        last += timedelta(days=1)
    return first, last


@pytest.mark.parametrize("word", list(NORTH_MONTHS))
def test_a_season_of_a_named_year_in_either_hemisphere(word: str) -> None:
    checked = 0
    forms = ["what did I do in the {s} of {y}?", "{s} {y}", "during {s}, {y}"]
    for year, form, (tz, table) in itertools.product(
        YEARS, forms, [(LISBON, NORTH_MONTHS), (NEW_YORK, NORTH_MONTHS), (SYDNEY, SOUTH_MONTHS)]
    ):
        months = table[word]
        # the run that holds February 15 or the season's middle month of that year, so that a
        # December-to-February season is the one most of which lies in the year
        middle = date(year, months[1], 15)
        want = run_of(middle, months)
        got = days(parse_time(form.format(s=word, y=year), at(date(2026, 11, 28), tz), tz), tz)
        assert got == want, (form, year, tz)
        checked += 1
    assert checked == 36


@pytest.mark.parametrize("word", ["summer", "winter", "spring", "fall"])
def test_last_season_is_the_latest_one_that_is_over(word: str) -> None:
    for today, (tz, table) in itertools.product(
        TODAYS, [(LISBON, NORTH_MONTHS), (SYDNEY, SOUTH_MONTHS)]
    ):
        months = table[word]
        d = today - timedelta(days=1)
        while not (d.month in months and (d + timedelta(days=1)).month not in months):
            d -= timedelta(days=1)  # walk back to the last day of a finished season
        want = run_of(d, months)
        got = days(parse_time(f"what did we do last {word}?", at(today, tz), tz), tz)
        assert got == want, (today, tz.key)
        assert got[1] < today


def test_ordinals_and_dotted_numbers_that_are_not_dates() -> None:
    now = at(date(2026, 11, 28), LISBON)
    for text in ["who lives on the 3rd floor?", "she came in on the 1st place podium",
                 "python 3.11.25 broke my build", "the 21st century",
                 "the 2nd time we met"]:  # fmt: skip
        assert parse_time(text, now, LISBON).window is None, text
    for text in ["what did I do on the 3rd?", "did we meet on the 3rd at noon", "14/06/25"]:
        assert parse_time(text, now, LISBON).window is not None, text


def test_a_season_word_inside_a_name_or_a_habit_is_not_a_time() -> None:
    now = at(date(2026, 11, 28), LISBON)
    for text in ["who ran the summer camp?", "did I fall on the ice", "spring cleaning tips",
                 "where do we go during the summer?"]:  # fmt: skip
        assert parse_time(text, now, LISBON).window is None, text


EASTER = {2019: date(2019, 4, 21), 2022: date(2022, 4, 17), 2023: date(2023, 4, 9),
          2024: date(2024, 3, 31), 2025: date(2025, 4, 20), 2026: date(2026, 4, 5),
          2027: date(2027, 3, 28)}  # fmt: skip
"""Easter Sundays from published calendars."""


def expected_holiday(name: str, year: int) -> tuple[date, date]:
    """(first, last day) of a holiday by the oracle's own route."""
    if name == "Easter":
        return EASTER[year] - timedelta(days=2), EASTER[year] + timedelta(days=1)
    if name == "Thanksgiving":
        thursdays = [w[3] for w in calendar.monthcalendar(year, 11) if w[3]]
        first = date(year, 11, thursdays[3])
        return first, first + timedelta(days=3)
    fixed = {"Christmas": (12, 24, 26), "Christmas Eve": (12, 24, 24),
             "Christmas Day": (12, 25, 25), "New Year's Eve": (12, 31, 31),
             "New Year's Day": (1, 1, 1), "Halloween": (10, 31, 31),
             "Valentine's Day": (2, 14, 14)}  # fmt: skip
    month, lo, hi = fixed[name]
    return date(year, month, lo), date(year, month, hi)


HOLIDAY_NAMES = ["Easter", "Thanksgiving", "Christmas", "Christmas Eve", "Christmas Day",
                 "New Year's Eve", "New Year's Day", "Halloween", "Valentine's Day"]  # fmt: skip


@pytest.mark.parametrize("name", HOLIDAY_NAMES)
def test_a_holiday_with_or_without_its_year(name: str) -> None:
    for year in YEARS:  # all before today
        for form in ["what did we eat at {h} {y}?", "over {h}, {y}", "around {h} {y}"]:
            got = days(parse_time(form.format(h=name, y=year), at(date(2026, 11, 28), LISBON),
                                  LISBON), LISBON)  # fmt: skip
            assert got == expected_holiday(name, year), (form, year)
    for today in TODAYS:
        now = at(today, LISBON)
        got = days(parse_time(f"what did I do last {name}?", now, LISBON), LISBON)
        this_year = expected_holiday(name, today.year)
        want = this_year if this_year[1] < today else expected_holiday(name, today.year - 1)
        assert got == want, today
        # without a year or "last" it may be a habit ("what do we eat at Christmas?"): every
        # one of them is meant, so no single year's days filter the search
        assert parse_time(f"what do we eat at {name}?", now, LISBON).window is None


PARTS = {"early": (1, 4), "mid": (5, 8), "late": (9, 12), "the first half of": (1, 6),
         "the second half of": (7, 12), "Q1": (1, 3), "Q2": (4, 6), "Q3": (7, 9),
         "Q4": (10, 12), "the first quarter of": (1, 3), "the end of": (9, 12),
         "the beginning of": (1, 4)}  # fmt: skip


@pytest.mark.parametrize(("part", "months"), list(PARTS.items()))
def test_a_part_of_a_year(part: str, months: tuple[int, int]) -> None:
    for year in YEARS:
        last_day = calendar.monthrange(year, months[1])[1]
        want = (date(year, months[0], 1), date(year, months[1], last_day))
        for text in [f"what happened in {part} {year}?", f"{part}-{year}"]:
            if part.startswith("the") and "-" in text:
                continue
            got = days(parse_time(text, at(date(2026, 11, 28), LISBON), LISBON), LISBON)
            assert got == want, text


@pytest.mark.parametrize("unit", ["day", "weekend", "week", "month", "year"])
def test_the_one_before_last(unit: str) -> None:
    for today in TODAYS:
        if unit == "day":
            want = (today - timedelta(days=2),) * 2
        elif unit == "weekend":
            # Saturdays up to today; today's own weekend does not count as "last"
            saturdays = [today - timedelta(days=i) for i in range(30)
                         if (today - timedelta(days=i)).weekday() == 5]  # fmt: skip
            own = today.weekday() in (5, 6)
            sat = saturdays[2 if own else 1]
            want = (sat, sat + timedelta(days=1))
        elif unit == "week":
            monday = today - timedelta(days=today.weekday())
            want = (monday - timedelta(weeks=2), monday - timedelta(weeks=2, days=-6))
        elif unit == "month":
            first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
            first = (first - timedelta(days=1)).replace(day=1)
            want = (first, first.replace(day=calendar.monthrange(first.year, first.month)[1]))
        else:
            want = (date(today.year - 2, 1, 1), date(today.year - 2, 12, 31))
        got = days(parse_time(f"what did I do the {unit} before last?", at(today, LISBON),
                              LISBON), LISBON)  # fmt: skip
        assert got == want, (unit, today)


def test_a_range_of_named_months_is_all_of_them() -> None:
    names = list(calendar.month_name)[1:]
    for (a, b), year in itertools.product(itertools.permutations(range(1, 13), 2), [2022, 2025]):
        first_year = year if a < b else year - 1
        want = (date(first_year, a, 1), date(year, b, calendar.monthrange(year, b)[1]))
        for form in ["between {a} and {b} {y}", "from {a} to {b} {y}"]:
            text = form.format(a=names[a - 1], b=names[b - 1], y=year)
            got = days(parse_time(text, at(date(2026, 11, 28), LISBON), LISBON), LISBON)
            assert got == want, text


def test_a_weekday_said_with_a_date_picks_the_year_it_fits() -> None:
    names = list(calendar.month_name)[1:]
    today = date(2026, 11, 28)
    checked = 0
    for month, day in itertools.product(range(1, 13), [3, 12, 21, 28]):
        latest = date(today.year - (date(today.year, month, day) > today), month, day)
        for back in range(1, 6):  # said about a date that was that weekday some years back
            d = latest.replace(year=latest.year - back)
            if any(latest.replace(year=latest.year - k).weekday() == d.weekday()
                   for k in range(back)):  # fmt: skip
                continue  # a nearer year has that weekday too: that one is meant
            weekday = calendar.day_name[d.weekday()]
            for form in ["on {w} the {d}th of {m}", "{w}, {m} {d}"]:
                text = form.format(w=weekday, d=day, m=names[month - 1])
                assert days(parse_time(text, at(today, LISBON), LISBON), LISBON) == (d, d), text
                checked += 1
    assert checked > 150


def test_numeric_dates_read_day_first_unless_the_zone_writes_month_first() -> None:
    now = date(2026, 11, 28)
    for d in [date(2025, m, n) for m in range(1, 13) for n in (1, 7, 12, 13, 25)]:
        for tz, month_first in [(LISBON, False), (NEW_YORK, True), (SYDNEY, False)]:
            ours = (
                f"{d.month:02}/{d.day:02}/{d.year}"
                if month_first
                else f"{d.day}/{d.month}/{d.year}"
            )
            got = days(parse_time(f"what did I do on {ours}?", at(now, tz), tz), tz)
            assert got == (d, d), (ours, tz.key)
        if d.day > 12:  # only one reading exists, whatever the zone
            for tz in (LISBON, NEW_YORK):
                text = f"on {d.month}/{d.day}/{d.year}"
                assert days(parse_time(text, at(now, tz), tz), tz) == (d, d), (text, tz.key)


def test_a_day_of_the_month_alone_is_the_latest_one() -> None:
    for today, day in itertools.product(TODAYS, [1, 3, 15, 21, 29, 31]):
        d = today
        while d.day != day:
            d -= timedelta(days=1)
        suffix = {1: "st", 3: "rd", 21: "st"}.get(day, "th")
        got = days(parse_time(f"what did I do on the {day}{suffix}?", at(today, LISBON), LISBON),
                   LISBON)  # fmt: skip
        assert got == (d, d), (today, day)


@pytest.mark.parametrize("unit", ["days", "weeks", "months"])
def test_a_few_units_ago_covers_two_to_four_of_them(unit: str) -> None:
    for today in TODAYS:
        got = days(parse_time(f"a few {unit} ago", at(today, LISBON), LISBON), LISBON)
        for n in (2, 3, 4):
            if unit == "days":
                inside = today - timedelta(days=n)
            elif unit == "weeks":
                inside = today - timedelta(weeks=n)
            else:
                total = today.year * 12 + today.month - 1 - n
                inside = date(total // 12, total % 12 + 1, 1)
            assert got[0] <= inside <= got[1], (unit, today, n)
        assert got[1] < today


def test_fortnights_years_ago_and_decades() -> None:
    for today in TODAYS:
        now = at(today, LISBON)
        monday = today - timedelta(days=today.weekday())
        got = days(parse_time("a fortnight ago", now, LISBON), LISBON)
        assert got == (monday - timedelta(weeks=2), monday - timedelta(weeks=2) + timedelta(6))
        got = days(parse_time("over the past fortnight", now, LISBON), LISBON)
        assert got == (today - timedelta(days=13), today)
        for n, word in [(1, "a"), (2, "two"), (3, "3")]:
            got = days(parse_time(f"what was I doing {word} years ago?", now, LISBON), LISBON)
            same_day = today.replace(year=today.year - n, day=min(today.day, 28))
            assert got[0] <= same_day - timedelta(days=150) and same_day + timedelta(150) <= got[1]
            assert (got[1] - got[0]).days <= 366
    now = at(date(2026, 11, 28), LISBON)
    for text, first in [("in the 2010s", 2010), ("the 90s", 1990), ("in the nineties", 1990),
                        ("the 1980s", 1980), ("in the 20s", 2020)]:  # fmt: skip
        assert days(parse_time(text, now, LISBON), LISBON) == (
            date(first, 1, 1), date(first + 9, 12, 31)), text  # fmt: skip
    # "the 1900s" is the century more often than its first ten years
    assert days(parse_time("a book from the 1900s", now, LISBON), LISBON)[1] >= date(1999, 12, 31)


def test_a_unit_after_a_named_time_is_that_unit_not_all_time_since() -> None:
    now = at(date(2026, 11, 28), LISBON)
    for text, want in [
        ("the week after New Year's Day 2025", (date(2025, 1, 2), date(2025, 1, 8))),
        ("the day after Christmas 2024", (date(2024, 12, 27), date(2024, 12, 27))),
        ("the week before Easter 2025", (date(2025, 4, 11), date(2025, 4, 17))),
        ("the month after 3 May 2024", (date(2024, 5, 4), date(2024, 6, 3))),
    ]:
        assert days(parse_time(text, now, LISBON), LISBON) == want, text
