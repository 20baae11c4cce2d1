"""Small helpers shared by the benchmarks."""

from __future__ import annotations

import statistics


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ms(seconds: float) -> str:
    """Seconds as a millisecond string."""
    return f"{seconds * 1000:.2f} ms"


def summary(values: list[float]) -> str:
    """p50 / p95 / max of a list of durations."""
    return (
        f"p50 {ms(pct(values, 50))}  p95 {ms(pct(values, 95))}  max {ms(max(values))}  "
        f"(n={len(values)}, mean {ms(statistics.mean(values))})"
    )
