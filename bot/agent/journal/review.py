"""Gentle, data-backed words for pushes: the weekly review and the briefing's one-line note.

Both say nothing rather than something weak: the review needs at least three entries in the
week, and the briefing note only appears when a change is sustained and large.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.agent.journal.analytics import METRIC_NAMES, CurrentState, Metric, value
from storage.models import JournalEntry

STREAK_DAYS = 4
"""A run of at least this many days, each higher (or lower) than the day before..."""
STREAK_POINTS = 15.0
"""...that moved at least this much in total, is a notable change."""
SHIFT_POINTS = 15.0
"""Or: the last 7 days differ from the 3 weeks before by this much (4+ entries each)."""


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def weekly_review_text(st: CurrentState) -> str | None:
    """The week in a few lines, or None when there are too few entries to tell."""
    if not st.enough:
        return None
    lines = [f"Your week in your journal ({len(st.entries)} entries):"]
    for m in st.metrics:
        before = ""
        if m.previous_mean is not None and m.mean is not None:
            diff = m.mean - m.previous_mean
            word = "up" if diff >= 5 else "down" if diff <= -5 else "about level"
            before = f", {word} from {m.previous_mean:.0f} the week before"
        lines.append(f"- {m.metric} {_fmt(m.mean)} of 100{before}")
    if st.themes:
        lines.append("You wrote most about " + ", ".join(t for t, _ in st.themes[:3]) + ".")
    if st.actions:
        lines.append(f"One idea for the week ahead: {st.actions[0].text}")
    lines.append("(Weekly review: turn it off with /journal review off.)")
    return "\n".join(lines)


def _streak(entries: Sequence[JournalEntry], metric: Metric) -> tuple[int, float, int]:
    """(days in the newest monotonic run, its total change, direction +1/-1/0)."""
    # One value per day: the last entry of the day.
    by_day = {e.day: v for e in entries if (v := value(e, metric)) is not None}
    days = sorted(by_day)
    if len(days) < STREAK_DAYS:
        return 0, 0.0, 0
    vals = [by_day[d] for d in days]
    direction = 1 if vals[-1] > vals[-2] else -1 if vals[-1] < vals[-2] else 0
    if direction == 0:
        return 0, 0.0, 0
    n = 1
    while n < len(vals) and (vals[-n] - vals[-n - 1]) * direction > 0:
        n += 1
    return n, vals[-1] - vals[-n], direction


def notable_change(
    last_week: Sequence[JournalEntry], weeks_before: Sequence[JournalEntry]
) -> str | None:
    """One sentence about a sustained change, or None when the data does not support one."""
    for metric in ("stress", "happiness", "energy"):
        days, change, direction = _streak(last_week, metric)
        if days >= STREAK_DAYS and abs(change) >= STREAK_POINTS:
            verb = "rising" if direction > 0 else "falling"
            return (
                f"Your {metric} has been {verb} for {days} days in your journal "
                f"({change:+.0f} points)."
            )
    for metric in METRIC_NAMES:
        recent = [v for e in last_week if (v := value(e, metric)) is not None]
        usual = [v for e in weeks_before if (v := value(e, metric)) is not None]
        if len(recent) >= 4 and len(usual) >= 4:
            a, b = sum(recent) / len(recent), sum(usual) / len(usual)
            if abs(a - b) >= SHIFT_POINTS:
                word = "above" if a > b else "below"
                return f"Your {metric} this week ({a:.0f}) is well {word} your usual ({b:.0f})."
    return None
