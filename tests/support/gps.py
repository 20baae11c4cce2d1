"""A generated week of GPS traces with planted stays (issue 24 tests and figures).

Stationary phones report every 1-3 minutes with ~15 m jitter; moving phones every 30 s.
Some fixes are poor (accuracy 400-1500 m, thrown far away), some minutes are missing, one
night the phone is dead for four hours (which splits that night's stay in two: nobody knows
where the phone was), and short stops under 15 minutes are not stays.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.location.geo import Fix, distance_m
from bot.location.stays import DetectedStay

PLACES = {
    "home": (52.5200, 13.4050),
    "office": (52.5300, 13.3850),
    "lunch": (52.5322, 13.3880),
    "gym": (52.5150, 13.3800),
    "bar": (52.5000, 13.4300),
    "kiosk": (52.5250, 13.3950),  # a 10-minute stop: never a stay
    "dentist": (52.5100, 13.4000),
}


@dataclass(frozen=True)
class Planted:
    """A stay the trace contains."""

    place: str
    start: datetime
    end: datetime


def offset(lat: float, lon: float, north_m: float, east_m: float) -> tuple[float, float]:
    """(lat, lon) moved by metres north and east."""
    dlat = north_m / 111_320
    dlon = east_m / (111_320 * math.cos(math.radians(lat)))
    return lat + dlat, lon + dlon


def stay_at(where: tuple[float, float], start: datetime, minutes: int, seed: int = 1) -> list[Fix]:
    """A phone lying still at ``where``: a fix every 2 minutes with ~15 m of jitter.

    Minutes are real minutes (counted in UTC), so a stay across a clock change lasts as long
    as it says.
    """
    rng = random.Random(seed)
    start = start.astimezone(UTC)
    return [
        Fix(start + timedelta(minutes=m), *offset(*where, rng.gauss(0, 15), rng.gauss(0, 15)), 10)
        for m in range(0, minutes + 1, 2)
    ]


def day_plan(day: datetime, weekday: int) -> list[tuple[str, int, int]]:
    """(place, start minute, end minute) of one local day; travel fills the gaps."""
    if weekday < 5:
        plan = [("home", 0, 7 * 60 + 50), ("office", 8 * 60 + 20, 12 * 60 + 30)]
        plan += [("lunch", 12 * 60 + 35, 13 * 60 + 20), ("office", 13 * 60 + 25, 17 * 60 + 30)]
        if weekday in (1, 3):
            plan += [("kiosk", 17 * 60 + 40, 17 * 60 + 50), ("gym", 18 * 60, 19 * 60 + 15)]
        if weekday == 2:
            plan += [("dentist", 17 * 60 + 50, 18 * 60 + 40)]
        plan += [("home", 19 * 60 + 45 if weekday != 4 else 18 * 60, 24 * 60)]
        if weekday == 4:  # Friday: out from 20:00 to 01:30, past 22:00
            plan[-1] = ("home", 18 * 60, 19 * 60 + 30)
            plan += [("bar", 20 * 60, 24 * 60)]
        return plan
    if weekday == 5:  # Saturday: the bar night continues, then home
        return [("bar", 0, 90), ("home", 2 * 60, 24 * 60)]
    return [("home", 0, 11 * 60), ("lunch", 12 * 60, 13 * 60 + 30), ("home", 14 * 60, 24 * 60)]


def generate(
    start_day: datetime, days: int = 7, seed: int = 24, dead_night: int = 2
) -> tuple[list[Fix], list[Planted]]:
    """Fixes and the stays planted in them, for ``days`` local days from ``start_day``."""
    rng = random.Random(seed)
    tz = start_day.tzinfo
    assert isinstance(tz, ZoneInfo)
    segments: list[tuple[str, datetime, datetime]] = []
    for d in range(days):
        day = (start_day + timedelta(days=d)).date()
        local = datetime(day.year, day.month, day.day, tzinfo=tz)
        for name, m0, m1 in day_plan(local, local.weekday()):
            segments.append((name, local + timedelta(minutes=m0), local + timedelta(minutes=m1)))
    # Join stays at the same place across midnight.
    merged: list[tuple[str, datetime, datetime]] = []
    for name, t0, t1 in segments:
        if merged and merged[-1][0] == name and merged[-1][2] == t0:
            merged[-1] = (name, merged[-1][1], t1)
        else:
            merged.append((name, t0, t1))
    dead_start = (start_day + timedelta(days=dead_night)).replace(hour=1, minute=0)
    dead_end = dead_start + timedelta(hours=4)
    fixes: list[Fix] = []
    planted: list[Planted] = []
    prev: tuple[str, datetime] | None = None
    for place, a, b in merged:
        lat0, lon0 = PLACES[place]
        if prev is not None:  # travel from the previous place, a fix every 30 s
            p_lat, p_lon = PLACES[prev[0]]
            t, steps = prev[1], max(1, int((a - prev[1]).total_seconds() // 30))
            for k in range(1, steps):
                f = k / steps
                fixes.append(
                    Fix(
                        t + timedelta(seconds=30 * k),
                        p_lat + (lat0 - p_lat) * f,
                        p_lon + (lon0 - p_lon) * f,
                        10.0,
                    )
                )
        t = a
        pieces: list[tuple[datetime, datetime]] = [(a, b)]
        if a < dead_start and b > dead_end:
            pieces = [(a, dead_start), (dead_end, b)]
        while t <= b:
            in_dead = dead_start <= t < dead_end
            dropout = rng.random() < 0.02  # a missing stretch of up to 40 minutes
            if dropout and t + timedelta(minutes=45) < b:
                t += timedelta(minutes=rng.randint(5, 40))
                continue
            if not in_dead:
                if rng.random() < 0.04:  # a poor fix, thrown far away
                    lat, lon = offset(lat0, lon0, rng.uniform(300, 1200), rng.uniform(-900, 900))
                    fixes.append(Fix(t, lat, lon, rng.uniform(400, 1500)))
                else:
                    lat, lon = offset(lat0, lon0, rng.gauss(0, 15), rng.gauss(0, 15))
                    fixes.append(Fix(t, lat, lon, rng.uniform(5, 40)))
            t += timedelta(seconds=rng.randint(60, 180))
        if (b - a) >= timedelta(minutes=15):
            for pa, pb in pieces:
                planted.append(Planted(place, pa, pb))
        prev = (place, b)
    return fixes, planted


def score(found: list[DetectedStay], planted: list[Planted]) -> dict[str, float]:
    """Precision and recall of stays, and start / end errors in minutes of the matched ones."""

    def overlap(d: DetectedStay, p: Planted) -> float:
        a, b = max(d.start, p.start), min(d.end, p.end)
        return max(0.0, (b - a).total_seconds())

    matched_planted: set[int] = set()
    starts, ends = [], []
    hits = 0
    for d in found:
        best = max(
            (
                (overlap(d, p), i)
                for i, p in enumerate(planted)
                if distance_m(d.lat, d.lon, *PLACES[p.place]) <= 100
            ),
            default=(0.0, -1),
        )
        if best[0] > 0 and best[1] not in matched_planted:
            hits += 1
            matched_planted.add(best[1])
            p = planted[best[1]]
            starts.append(abs((d.start - p.start).total_seconds()) / 60)
            ends.append(abs((d.end - p.end).total_seconds()) / 60)
    return {
        "precision": hits / len(found),
        "recall": len(matched_planted) / len(planted),
        "start_median_min": statistics.median(starts),
        "start_max_min": max(starts),
        "end_median_min": statistics.median(ends),
        "end_max_min": max(ends),
    }


BERLIN = ZoneInfo("Europe/Berlin")
"""The zone the generated week is planted in."""
WEEK = datetime(2026, 3, 23, tzinfo=BERLIN)
"""The Monday the generated week starts (the week of a daylight-saving change)."""
