"""Pure numbers over scored entries: bucketed series, trends, drivers, the current state.

Nothing here reads the database or calls a model; every number an answer gives comes from
these functions through a tool result. Fewer than ``MIN_ENTRIES`` entries is "too little to
tell", never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from statistics import fmean
from typing import Literal

from storage.models import JournalEntry

Metric = Literal["happiness", "stress", "energy"]
Bucket = Literal["day", "week", "month"]
METRIC_NAMES: tuple[Metric, ...] = ("happiness", "stress", "energy")
MIN_ENTRIES = 3


def journal_entries(count: int) -> str:
    """``1 journal entry``, ``3 journal entries``: a count as people write it."""
    return f"{count} journal {'entry' if count == 1 else 'entries'}"


TREND_POINTS = 8.0
"""A change of at least this much (on 0-100) over the window counts as rising or falling."""
DRIVER_GAP = 10.0
"""A theme or person is a driver when entries with it differ from the rest by this much."""


def value(entry: JournalEntry, metric: Metric) -> float | None:
    """The entry's score for ``metric`` (None until scored)."""
    v: float | None = getattr(entry, metric)
    return v


def bucket_start(day: date, bucket: Bucket) -> date:
    """The first day of the bucket holding ``day`` (weeks start on Monday)."""
    if bucket == "week":
        return day - timedelta(days=day.weekday())
    if bucket == "month":
        return day.replace(day=1)
    return day


def _next(start: date, bucket: Bucket) -> date:
    if bucket == "day":
        return start + timedelta(days=1)
    if bucket == "week":
        return start + timedelta(weeks=1)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


def bucket_label(start: date, bucket: Bucket) -> str:
    """How a bucket is named in answers and on charts."""
    if bucket == "month":
        return f"{start:%b %Y}"
    if bucket == "week":
        return f"week of {start:%d %b %Y}"
    return f"{start:%a %d %b %Y}"


@dataclass(frozen=True, slots=True)
class Point:
    """One bucket of a series."""

    start: date
    label: str
    mean: float | None
    """None when the bucket has no scored entry."""
    count: int
    entry_ids: tuple[int, ...] = ()


def series(
    entries: Sequence[JournalEntry], metric: Metric, first: date, last: date, bucket: Bucket
) -> list[Point]:
    """Averages with counts for every bucket from ``first`` to ``last`` (empty ones too)."""
    groups: dict[date, list[JournalEntry]] = {}
    for e in entries:
        if first <= e.day <= last and value(e, metric) is not None:
            groups.setdefault(bucket_start(e.day, bucket), []).append(e)
    out: list[Point] = []
    start = bucket_start(first, bucket)
    while start <= last:
        group = groups.get(start, [])
        vals = [v for e in group if (v := value(e, metric)) is not None]
        out.append(
            Point(
                start,
                bucket_label(start, bucket),
                round(fmean(vals), 1) if vals else None,
                len(vals),
                tuple(e.id for e in group if e.id is not None),
            )
        )
        start = _next(start, bucket)
    return out


def slope_per_day(entries: Sequence[JournalEntry], metric: Metric) -> float | None:
    """Least-squares slope of the metric over the entries' days (points per day)."""
    pts = [(e.day.toordinal(), v) for e in entries if (v := value(e, metric)) is not None]
    if len(pts) < MIN_ENTRIES:
        return None
    mx = fmean(x for x, _ in pts)
    my = fmean(y for _, y in pts)
    var = sum((x - mx) ** 2 for x, _ in pts)
    if var == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in pts) / var


def trend_word(slope: float | None, days: int) -> str:
    """``rising``, ``falling`` or ``steady`` over ``days`` (``unknown`` without a slope)."""
    if slope is None:
        return "unknown"
    change = slope * max(days - 1, 1)
    if change >= TREND_POINTS:
        return "rising"
    if change <= -TREND_POINTS:
        return "falling"
    return "steady"


def mean_of(entries: Sequence[JournalEntry], metric: Metric) -> float | None:
    """The average score, or None when no entry is scored."""
    vals = [v for e in entries if (v := value(e, metric)) is not None]
    return round(fmean(vals), 1) if vals else None


@dataclass(frozen=True, slots=True)
class Driver:
    """A theme or person that goes with better or worse days."""

    name: str
    kind: str
    """``theme`` or ``person``."""
    metric: Metric
    with_mean: float
    without_mean: float
    entries: tuple[JournalEntry, ...]


def _tags(e: JournalEntry) -> list[tuple[str, str]]:
    return [(t, "theme") for t in e.themes or []] + [(p, "person") for p in e.people or []]


def drivers(entries: Sequence[JournalEntry]) -> tuple[list[Driver], list[Driver]]:
    """(stressors, protective factors), strongest first.

    A driver is a theme or person on at least two entries whose stress (or happiness) differs
    from the other entries' by ``DRIVER_GAP`` or more.
    """
    tagged: dict[tuple[str, str], list[JournalEntry]] = {}
    for e in entries:
        for tag in _tags(e):
            tagged.setdefault(tag, []).append(e)
    stressors: list[Driver] = []
    protective: list[Driver] = []
    for (name, kind), group in tagged.items():
        rest = [e for e in entries if e not in group]
        if len(group) < 2 or len(rest) < 2:
            continue
        ws, rs = mean_of(group, "stress"), mean_of(rest, "stress")
        wh, rh = mean_of(group, "happiness"), mean_of(rest, "happiness")
        if ws is not None and rs is not None and ws - rs >= DRIVER_GAP:
            stressors.append(Driver(name, kind, "stress", ws, rs, tuple(group)))
        elif wh is not None and rh is not None and wh - rh >= DRIVER_GAP:
            protective.append(Driver(name, kind, "happiness", wh, rh, tuple(group)))
        elif ws is not None and rs is not None and rs - ws >= DRIVER_GAP:
            protective.append(Driver(name, kind, "stress", ws, rs, tuple(group)))
    stressors.sort(key=lambda d: d.without_mean - d.with_mean)
    protective.sort(key=lambda d: -abs(d.with_mean - d.without_mean))
    return stressors, protective


def top_themes(entries: Sequence[JournalEntry], n: int = 5) -> list[tuple[str, int]]:
    """The most frequent themes with their counts."""
    return Counter(t for e in entries for t in e.themes or []).most_common(n)


@dataclass(frozen=True, slots=True)
class MetricState:
    """One metric over the recent window."""

    metric: Metric
    mean: float | None
    previous_mean: float | None
    """The same metric over the window before (for "up from ...")."""
    trend: str
    first_half: float | None
    second_half: float | None


@dataclass(frozen=True, slots=True)
class Action:
    """A suggested action and the entries it rests on."""

    text: str
    entries: tuple[JournalEntry, ...]


@dataclass(slots=True)
class CurrentState:
    """The last ``days`` days in numbers, with drivers and 1-3 action items."""

    first: date
    last: date
    entries: list[JournalEntry]
    metrics: list[MetricState] = field(default_factory=list)
    themes: list[tuple[str, int]] = field(default_factory=list)
    stressors: list[Driver] = field(default_factory=list)
    protective: list[Driver] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)

    @property
    def enough(self) -> bool:
        """At least ``MIN_ENTRIES`` scored entries."""
        return len(self.entries) >= MIN_ENTRIES


def _extreme(
    entries: Sequence[JournalEntry], metric: Metric, n: int, *, high: bool
) -> tuple[JournalEntry, ...]:
    scored = [e for e in entries if value(e, metric) is not None]
    scored.sort(key=lambda e: (value(e, metric) or 0.0, e.day), reverse=high)
    return tuple(scored[:n])


def current_state(
    recent: Sequence[JournalEntry], before: Sequence[JournalEntry], first: date, last: date
) -> CurrentState:
    """The state of ``recent`` (the window) compared with ``before`` (the window before it)."""
    entries = [e for e in recent if e.scorer]
    st = CurrentState(first, last, entries)
    if not st.enough:
        return st
    days = (last - first).days + 1
    mid = first + timedelta(days=days // 2)
    for m in METRIC_NAMES:
        st.metrics.append(
            MetricState(
                m,
                mean_of(entries, m),
                mean_of(before, m),
                trend_word(slope_per_day(entries, m), days),
                mean_of([e for e in entries if e.day < mid], m),
                mean_of([e for e in entries if e.day >= mid], m),
            )
        )
    st.themes = top_themes(entries)
    st.stressors, st.protective = drivers(entries)
    st.actions = _actions(st)
    return st


def _actions(st: CurrentState) -> list[Action]:
    by = {m.metric: m for m in st.metrics}
    out: list[Action] = []
    stress, energy = by["stress"], by["energy"]
    if stress.trend == "rising" or (stress.mean or 0) >= 65:
        if st.stressors:
            top = st.stressors[0]
            out.append(
                Action(
                    f"Stress is {stress.trend} (about {stress.mean:.0f} of 100) and is highest on "
                    f"days that mention {top.name} ({top.with_mean:.0f} vs {top.without_mean:.0f}"
                    f" otherwise): pick one small concrete step about {top.name} this week.",
                    _extreme(top.entries, "stress", 3, high=True),
                )
            )
        else:
            out.append(
                Action(
                    f"Stress is {stress.trend} (about {stress.mean:.0f} of 100): block one "
                    "unhurried hour for yourself in the next few days.",
                    _extreme(st.entries, "stress", 3, high=True),
                )
            )
    if st.protective:
        good = st.protective[0]
        out.append(
            Action(
                f"Days with {good.name} went better ({good.metric} {good.with_mean:.0f} vs "
                f"{good.without_mean:.0f} otherwise): plan more of it.",
                tuple(sorted(good.entries, key=lambda e: e.day, reverse=True)[:3]),
            )
        )
    low_energy = energy.trend == "falling" or (energy.mean is not None and energy.mean < 45)
    if low_energy and len(out) < 3:
        out.append(
            Action(
                f"Energy is {energy.trend} (about {energy.mean:.0f} of 100): protect sleep and "
                "a little movement on the days it dips.",
                _extreme(st.entries, "energy", 3, high=False),
            )
        )
    if not out:
        latest = tuple(sorted(st.entries, key=lambda e: e.day, reverse=True)[:2])
        out.append(Action("Things look steady: keep doing what you are doing.", latest))
    return out[:3]


@dataclass(slots=True)
class PeriodStats:
    """Numbers of a month or year: averages, extremes, drivers."""

    entries: list[JournalEntry]
    averages: dict[str, float | None] = field(default_factory=dict)
    best: tuple[JournalEntry, ...] = ()
    worst: tuple[JournalEntry, ...] = ()
    themes: list[tuple[str, int]] = field(default_factory=list)
    stressors: list[Driver] = field(default_factory=list)
    protective: list[Driver] = field(default_factory=list)

    @property
    def enough(self) -> bool:
        """At least ``MIN_ENTRIES`` scored entries."""
        return len(self.entries) >= MIN_ENTRIES


def period_stats(entries: Sequence[JournalEntry]) -> PeriodStats:
    """The numbers a month or year in review rests on."""
    scored = [e for e in entries if e.scorer]
    ps = PeriodStats(scored)
    if not ps.enough:
        return ps
    ps.averages = {m: mean_of(scored, m) for m in METRIC_NAMES}
    ps.best = _extreme(scored, "happiness", 3, high=True)
    ps.worst = _extreme(scored, "stress", 3, high=True)
    ps.themes = top_themes(scored)
    ps.stressors, ps.protective = drivers(scored)
    return ps
