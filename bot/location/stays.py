"""Stay-point detection (pure): where a person stayed, from a stream of noisy fixes.

The classic stay-point method (a run of fixes that keeps within a distance of its centre for
at least a minimum duration), made robust for phones:

* fixes whose accuracy is worse than ``max_accuracy_m`` are dropped before anything else;
* the run is compared with its running centroid, not its first fix, so one jittery first
  fix does not decide the stay; a short excursion of up to ``outlier_run`` fixes that comes
  back inside the radius is treated as jitter and skipped;
* a silence longer than ``max_gap`` ends a stay: nobody knows where the phone was meanwhile;
* the stay's position is the medoid of its fixes (a real fix, insensitive to outliers);
* consecutive stays at the same spot separated only by jitter are merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from bot.location.geo import EARTH_RADIUS_M, Fix, distance_m


@dataclass(frozen=True, slots=True)
class StayParams:
    """Tuning of the detector."""

    radius_m: float = 100.0
    """A fix further than this from the run's centre ends the run."""
    min_duration: timedelta = timedelta(minutes=15)
    """Shorter runs are passing through, not stays."""
    max_gap: timedelta = timedelta(hours=3)
    """A silence longer than this ends a stay."""
    max_accuracy_m: float = 250.0
    """Fixes less accurate than this are ignored."""
    outlier_run: int = 2
    """Up to this many consecutive stray fixes inside a stay count as jitter."""
    merge_gap: timedelta = timedelta(minutes=20)
    """Stays this close in time and within ``radius_m`` of each other are one stay."""


@dataclass(frozen=True, slots=True)
class DetectedStay:
    """A stay found in the fixes."""

    start: datetime
    """Time of its first fix."""
    end: datetime
    """Time of its last fix."""
    lat: float
    """Latitude of its medoid fix."""
    lon: float
    """Longitude of its medoid fix."""
    points: int
    """How many fixes it is made of."""

    @property
    def duration(self) -> timedelta:
        """How long it lasted."""
        return self.end - self.start


def usable(fixes: list[Fix], params: StayParams) -> list[Fix]:
    """Accurate-enough fixes in time order, one per timestamp."""
    seen: set[datetime] = set()
    out: list[Fix] = []
    for f in sorted(fixes, key=lambda f: f.ts):
        if f.accuracy_m is not None and f.accuracy_m > params.max_accuracy_m:
            continue
        if f.ts in seen:
            continue
        seen.add(f.ts)
        out.append(f)
    return out


def medoid(run: list[Fix]) -> Fix:
    """The fix with the least total distance to the others (sampled for long runs)."""
    step = max(1, len(run) // 200)  # keeps long nights at home O(200^2)
    sample = run[::step]
    # All pairwise haversine distances at once (a Python loop over 40,000 pairs per stay
    # was most of a week's detection: 1 s of 5,000 fixes).
    lat = np.radians(np.array([f.lat for f in sample]))
    lon = np.radians(np.array([f.lon for f in sample]))
    h = (
        np.sin((lat[:, None] - lat[None, :]) / 2) ** 2
        + np.cos(lat)[:, None]
        * np.cos(lat)[None, :]
        * np.sin((lon[:, None] - lon[None, :]) / 2) ** 2
    )
    total = (2 * EARTH_RADIUS_M * np.arcsin(np.minimum(1.0, np.sqrt(h)))).sum(axis=1)
    return sample[int(np.argmin(total))]


def _grow(fixes: list[Fix], i: int, params: StayParams) -> tuple[list[Fix], int]:
    """The run starting at ``i`` and the index of the first fix after it."""
    run = [fixes[i]]
    sum_lat, sum_lon = fixes[i].lat, fixes[i].lon
    j = i + 1
    while j < len(fixes):
        if fixes[j].ts - run[-1].ts > params.max_gap:
            break
        c_lat, c_lon = sum_lat / len(run), sum_lon / len(run)
        if distance_m(c_lat, c_lon, fixes[j].lat, fixes[j].lon) <= params.radius_m:
            run.append(fixes[j])
            sum_lat += fixes[j].lat
            sum_lon += fixes[j].lon
            j += 1
            continue
        # A short excursion that comes straight back is jitter: skip it.
        back = next(
            (
                k
                for k in range(j + 1, min(j + 1 + params.outlier_run, len(fixes)))
                if fixes[k].ts - run[-1].ts <= params.max_gap
                and distance_m(c_lat, c_lon, fixes[k].lat, fixes[k].lon) <= params.radius_m
            ),
            None,
        )
        if back is None:
            break
        j = back
    return run, j


def merge(
    stays: list[DetectedStay], params: StayParams, before: DetectedStay | None = None
) -> list[DetectedStay]:
    """Join consecutive stays at the same spot separated only by jitter (a left fold).

    ``before``: the merged stay just before ``stays`` (kept from an earlier detection), which
    the first of them may join; it is then the first of the result.
    """
    out: list[DetectedStay] = [before] if before is not None else []
    for s in stays:
        prev = out[-1] if out else None
        if (
            prev is not None
            and s.start - prev.end <= params.merge_gap
            and distance_m(prev.lat, prev.lon, s.lat, s.lon) <= params.radius_m
        ):
            keep = prev if prev.points >= s.points else s
            out[-1] = DetectedStay(prev.start, s.end, keep.lat, keep.lon, prev.points + s.points)
        else:
            out.append(s)
    return out


def detect_runs(fixes: list[Fix], params: StayParams) -> list[DetectedStay]:
    """The stays in ``fixes`` before merging (the greedy pass from the oldest fix)."""
    pts = usable(fixes, params)
    found: list[DetectedStay] = []
    i = 0
    while i < len(pts):
        run, j = _grow(pts, i, params)
        if run[-1].ts - run[0].ts >= params.min_duration:
            m = medoid(run)
            found.append(DetectedStay(run[0].ts, run[-1].ts, m.lat, m.lon, len(run)))
            i = j
        else:
            i += 1
    return found


def detect_stays(fixes: list[Fix], params: StayParams | None = None) -> list[DetectedStay]:
    """The stays in ``fixes`` (any order, repeats allowed), oldest first."""
    p = params or StayParams()
    return merge(detect_runs(fixes, p), p)
