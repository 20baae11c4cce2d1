"""Date phrases: lifebot's parser against ``dateparser`` and ``ctparse`` (issue 30 bake-off).

``python -m bench.dates [--system ours|dateparser|ctparse]`` generates instances of each phrase
class (several months, years and wordings), asks the system for a window, and prints, per
class, how many windows were exactly right (first and last local day), how many put a point
inside the right window (the best a parser that returns one datetime can do), and the median
latency. The libraries are not dependencies of lifebot: run this module with an interpreter
that has the one under test (the module itself needs only the standard library and, for
``ours``, lifebot's parser). Expected windows are computed here with ``calendar``.
"""

from __future__ import annotations

import argparse
import calendar
import itertools
import json
import statistics
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
TZ = ZoneInfo("UTC")
MONTHS = list(calendar.month_name)[1:]
YEARS = [2019, 2022, 2024]
Window = tuple[date, date] | None
"""(first day, last day); None where no date should be read (an undatable event)."""


def _nth(year: int, month: int, n: int, unit: str) -> tuple[date, date] | None:
    weeks = calendar.monthcalendar(year, month)
    if unit == "week":
        length = calendar.monthrange(year, month)[1]
        if n == -1:
            return date(year, month, length - 6), date(year, month, length)
        return date(year, month, 7 * n - 6), date(year, month, min(7 * n, length))
    col = 5 if unit == "weekend" else list(calendar.day_name).index(unit.capitalize())
    days = [w[col] for w in weeks if w[col]]
    if n > len(days):
        return None
    d = date(year, month, days[n - 1 if n > 0 else -1])
    return d, d + timedelta(days=1 if unit == "weekend" else 0)


def _last_day(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def phrase_classes() -> dict[str, list[tuple[str, str, Window]]]:
    """Class name -> [(question, phrase alone, expected window)]."""
    out: dict[str, list[tuple[str, str, Window]]] = {}
    add: Callable[[str, str, str, Window], None] = lambda c, q, p, w: out.setdefault(  # noqa: E731
        c, []
    ).append((q, p, w))
    ords = {"first": 1, "second": 2, "third": 3, "last": -1}
    for (o, n), unit, month, year in itertools.product(
        ords.items(), ["weekend", "week", "monday", "friday"], range(1, 13, 2), YEARS
    ):
        want = _nth(year, month, n, unit)
        if want is not None:
            p = f"the {o} {unit} of {MONTHS[month - 1]} {year}"
            add("part of a named month", f"What did I do {p}?", p, want)
    for part, (lo, hi) in {"early": (1, 10), "mid": (11, 20), "late": (21, 31)}.items():
        for month, year in itertools.product(range(1, 13, 2), YEARS):
            p = f"{part} {MONTHS[month - 1]} {year}"
            last = min(hi, calendar.monthrange(year, month)[1])
            add("early/mid/late month", f"Where was Ana in {p}?", p,
                (date(year, month, lo), date(year, month, last)))  # fmt: skip
    for bound, month, year in itertools.product(["as of", "by", "until"], range(1, 13, 2), YEARS):
        p = f"{bound} {MONTHS[month - 1]} {year}"
        add("as of / by / until", f"Where did Ana live {p}?", p,
            (date(1970, 1, 1), _last_day(year, month)))  # fmt: skip
    for month, year in itertools.product(range(1, 13, 2), YEARS):
        first = date(year, month, 1)
        p = f"before {MONTHS[month - 1]} {year}"
        add("before / after", f"what did I read {p}?", p,
            (date(1970, 1, 1), first - timedelta(days=1)))  # fmt: skip
        p = f"after {MONTHS[month - 1]} {year}"
        add("before / after", f"what did I read {p}?", p,
            (_last_day(year, month) + timedelta(days=1), NOW.date()))  # fmt: skip
    for month, year in itertools.product(range(1, 13, 2), [2018, 2023, 2024]):
        d = date(year, month, 1 + (3 * month + year) % 28)
        mon = MONTHS[month - 1]
        for p in (f"{mon} {d.day},{d.year}", f"{mon} {d.day} ,{d.year}",
                  f"{d.day}-{mon[:3]}-{d.year}", f"{mon[:3]}. {d.day}th,{d.year}",
                  f"{d.day} {mon},{d.year}"):  # fmt: skip
            add("punctuated dates", f"What did Joanna say on {p}?", p, (d, d))
    for month, year in itertools.product(range(1, 13, 2), YEARS):
        d = date(year, month, 1 + (5 * month) % 28)
        p = f"{d.day} {MONTHS[month - 1]} {year}"
        add("plain dates and months", f"What did I do on {p}?", p, (d, d))
        p = f"{MONTHS[month - 1]} {year}"
        add("plain dates and months", f"What did I do in {p}?", p,
            (date(year, month, 1), _last_day(year, month)))  # fmt: skip
    today = NOW.date()
    monday = today - timedelta(days=today.weekday())
    for p, want in [
        ("yesterday", (today - timedelta(1), today - timedelta(1))),
        ("3 days ago", (today - timedelta(3), today - timedelta(3))),
        ("last week", (monday - timedelta(7), monday - timedelta(1))),
        ("two weeks ago", (monday - timedelta(14), monday - timedelta(8))),
        ("last Friday", (today - timedelta((today.weekday() - 4) % 7 or 7),) * 2),
        ("last month", (date(2026, 2, 1), date(2026, 2, 28))),
        ("last weekend", (date(2026, 3, 7), date(2026, 3, 8))),
    ]:
        add("relative to today", f"What did I eat {p}?", p, want)
    for month, year in itertools.product(range(1, 13, 2), [2022, 2023]):
        d = date(year, month, 15)
        p = f"the week before {MONTHS[month - 1]} 15, {year}"
        add("relative to a named date", f"What happened {p}?", p, (d - timedelta(days=7), d))
    _year_classes(add)
    for link, event in itertools.product(
        ["after", "since", "before"], ["the move", "my wedding", "the road trip", "her surgery"]
    ):
        p = f"{link} {event}"
        add("tied to an event (no date)", f"Which restaurant did we try {p}?", p, None)
    return out


def _year_classes(add: Callable[[str, str, str, Window], None]) -> None:
    """The named times of a year and the classes added with them (seasons, holidays, ...)."""
    seasons = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11)}
    for (word, (lo, hi)), year in itertools.product(seasons.items(), YEARS):
        p = f"the {word} of {year}"
        add("season of a year", f"What did I do in {p}?", p,
            (date(year, lo, 1), _last_day(year, hi)))  # fmt: skip
    for year in YEARS:
        p = f"Christmas {year}"
        add("holiday of a year", f"Who came over at {p}?", p,
            (date(year, 12, 24), date(year, 12, 26)))  # fmt: skip
        p = f"New Year's Eve {year}"
        add("holiday of a year", f"Where was I on {p}?", p, (date(year, 12, 31),) * 2)
    parts = {"early": (1, 4), "late": (9, 12), "Q2": (4, 6), "the second half of": (7, 12)}
    for (part, (lo, hi)), year in itertools.product(parts.items(), YEARS):
        p = f"{part} {year}"
        add("part of a year", f"What happened in {p}?", p,
            (date(year, lo, 1), _last_day(year, hi)))  # fmt: skip
    today = NOW.date()
    monday = today - timedelta(days=today.weekday())
    for p, want in [
        ("the weekend before last", (date(2026, 2, 28), date(2026, 3, 1))),
        ("the week before last", (monday - timedelta(14), monday - timedelta(8))),
        ("the month before last", (date(2026, 1, 1), date(2026, 1, 31))),
        ("a fortnight ago", (monday - timedelta(14), monday - timedelta(8))),
    ]:
        add("before last, fortnight", f"What did I eat {p}?", p, want)
    for month, year in itertools.product(range(1, 13, 2), YEARS):
        d = date(year, month, 13 + month % 5)  # over 12: only one reading
        p = f"{d.day}/{d.month}/{d.year}"
        add("numeric dates", f"What did I do on {p}?", p, (d, d))
        first = date(year, month, 1)
        last_month = min(month + 2, 12)
        p = f"between {MONTHS[month - 1]} and {MONTHS[last_month - 1]} {year}"
        add("range of months", f"Where did I travel {p}?", p,
            (first, _last_day(year, last_month)))  # fmt: skip


def _ours(text: str) -> tuple[Window, bool]:
    from bot.agent.retrieval.timeparse import parse_time  # noqa: PLC0415

    w = parse_time(text, NOW, TZ).window
    if w is None:
        return None, False
    return (w.start.date(), (w.end - timedelta(seconds=1)).date()), False


def _dateparser(text: str) -> tuple[Window, bool]:
    from dateparser.search import search_dates  # type: ignore[import-untyped]  # noqa: PLC0415

    settings = {"RELATIVE_BASE": NOW.replace(tzinfo=None), "PREFER_DATES_FROM": "past"}
    found = search_dates(text, settings=settings, languages=["en"])
    if not found:
        return None, True
    d = found[0][1].date()
    return (d, d), True  # one datetime: a point, never a window


def _ctparse(text: str) -> tuple[Window, bool]:
    from ctparse import ctparse  # type: ignore[import-not-found]  # noqa: PLC0415
    from ctparse.types import Interval, Time  # type: ignore[import-not-found]  # noqa: PLC0415

    parsed = ctparse(text, ts=NOW.replace(tzinfo=None), timeout=1.0)
    res = parsed.resolution if parsed is not None else None

    def span(t: Time) -> tuple[date, date] | None:
        if t.year is None or t.month is None:
            return None
        if t.day is None:
            return date(t.year, t.month, 1), _last_day(t.year, t.month)
        d = date(t.year, t.month, t.day)
        return d, d

    if isinstance(res, Time):
        return span(res), False
    if isinstance(res, Interval):
        lo = span(res.t_from) if res.t_from is not None else (date(1970, 1, 1),) * 2
        hi = span(res.t_to) if res.t_to is not None else (NOW.date(),) * 2
        if lo is None or hi is None:
            return None, False
        return (lo[0], hi[1]), False
    return None, False


SYSTEMS = {"ours": _ours, "dateparser": _dateparser, "ctparse": _ctparse}


def _score(system: str, whole: bool) -> Iterator[tuple[str, int, int, int, float]]:
    """(class, instances, exact, point inside, median ms) of one system."""
    parse = SYSTEMS[system]
    for name, items in phrase_classes().items():
        exact = inside = 0
        times = []
        for question, phrase, want in items:
            t0 = time.perf_counter()
            try:
                got, point = parse(question if whole else phrase)
            except Exception:  # noqa: BLE001  (a library failing on a phrase scores it wrong)
                got, point = None, False
            times.append((time.perf_counter() - t0) * 1000)
            if got == want:
                exact += 1 if not point or want is None or want[0] == want[1] else 0
                inside += 1
            elif got is not None and want is not None and want[0] <= got[0] <= want[1] and point:
                inside += 1
        yield name, len(items), exact, inside, statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    """Print one system's table (or JSON lines with --json)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--system", choices=sorted(SYSTEMS), default="ours")
    parser.add_argument("--phrase", action="store_true", help="the phrase alone, not the question")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = list(_score(args.system, not args.phrase))
    for name, n, exact, inside, ms in rows:
        if args.json:
            row = {"system": args.system, "phrase": args.phrase, "class": name, "n": n,
                   "exact": exact, "inside": inside, "ms": round(ms, 3)}  # fmt: skip
            print(json.dumps(row))
        else:
            print(
                f"{args.system:10} {name:28} {exact:4}/{n:<4} exact {inside:4} inside {ms:.2f} ms"
            )


if __name__ == "__main__":
    main()
