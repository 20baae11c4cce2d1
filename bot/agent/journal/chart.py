"""A metric over a range as a PNG a phone shows well, and the same series in words.

matplotlib's object API on the Agg canvas: no display, no global pyplot state, so charts can
be drawn in worker threads (``asyncio.to_thread``) while the event loop keeps serving.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from bot.agent.journal.analytics import MIN_ENTRIES, Bucket, Metric, Point, journal_entries

COLOURS = {"happiness": "#2a9d8f", "stress": "#e76f51", "energy": "#e9c46a"}
SIZE_INCHES = (8.0, 5.0)
DPI = 150
"""1200 x 750 pixels: sharp on a phone, a few tens of kilobytes."""


def _short(p: Point, bucket: Bucket) -> str:
    if bucket == "month":
        return f"{p.start:%b %y}"
    return f"{p.start:%d %b}"


def render_chart(points: Sequence[Point], metric: Metric, title: str, bucket: Bucket) -> bytes:
    """The series as a PNG: the average per bucket (0-100), empty buckets left as gaps."""
    # matplotlib takes a third of a second to import: only a chart pays for it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    fig = Figure(figsize=SIZE_INCHES, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(points)))
    ys = [p.mean if p.mean is not None else float("nan") for p in points]
    colour = COLOURS[metric]
    ax.plot(xs, ys, color=colour, linewidth=3, marker="o", markersize=6)
    ax.fill_between(xs, ys, 0, color=colour, alpha=0.12)
    ax.set_ylim(0, 100)
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.tick_params(labelsize=13)
    ax.set_title(title, fontsize=18, pad=12)
    ax.set_ylabel(f"{metric} (0-100)", fontsize=14)
    ax.grid(axis="y", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    step = max(1, len(points) // 6)  # at most ~7 labels: readable on a narrow screen
    ax.set_xticks(xs[::step])
    ax.set_xticklabels([_short(p, bucket) for p in points[::step]])
    if xs:
        ax.set_xlim(-0.5, len(xs) - 0.5)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()


def describe(points: Sequence[Point], metric: Metric, label: str) -> str:
    """The chart in words (for the pendant, and under the picture everywhere else)."""
    filled = [p for p in points if p.mean is not None]
    count = sum(p.count for p in points)
    if count < MIN_ENTRIES:
        return (
            f"Your {metric}, {label}: only {journal_entries(count)}, too little to tell. "
            "Write a few more and ask again."
        )
    weighted = sum((p.mean or 0.0) * p.count for p in filled) / count
    low = min(filled, key=lambda p: p.mean or 0.0)
    high = max(filled, key=lambda p: p.mean or 0.0)
    first, last = filled[0], filled[-1]
    direction = "about the same as"
    if (last.mean or 0) - (first.mean or 0) >= 8:
        direction = "up from"
    elif (first.mean or 0) - (last.mean or 0) >= 8:
        direction = "down from"
    return (
        f"Your {metric}, {label}: {weighted:.0f} of 100 on average from {count} entries; "
        f"lowest {low.mean:.0f} ({low.label}), highest {high.mean:.0f} ({high.label}); "
        f"latest {last.mean:.0f}, {direction} {first.mean:.0f} at the start."
    )
