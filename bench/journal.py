"""Benchmark: the journal's local work (offline scoring, analytics, charts).

    .venv/bin/python -m bench.journal

- Scoring: the offline scorer per entry against plain VADER on the same texts (baseline), so
  the cost of our stress/energy/theme/name passes is a ratio.
- Analytics: a daily series and the current state over a year of entries.
- Charts: render time, and what it does to the event loop: the longest stall a 1 ms ticker
  sees while a chart is drawn inline (on the loop) vs via ``asyncio.to_thread`` (as lifebot does).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, date, datetime, timedelta

from bench._stats import ms, summary
from bot.agent.journal.analytics import Bucket, Point, current_state, series
from bot.agent.journal.chart import render_chart
from bot.agent.journal.scoring import LexiconScorer, _vader
from storage.models import JournalEntry
from tests.support.journal import planted_journal

TODAY = date(2025, 6, 30)


def _entries(days: int) -> list[JournalEntry]:
    out = []
    for i, p in enumerate(planted_journal(TODAY, days)):
        out.append(
            JournalEntry(
                id=i + 1, user_id=1, ref=str(i), day=p.day, text=p.text, scorer="bench",
                written_at=datetime(2025, 1, 1, tzinfo=UTC), happiness=p.happiness,
                stress=p.stress, energy=p.energy, themes=p.themes, people=p.people,
            )
        )  # fmt: skip
    return out


def _time(fn: object, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t)
    return out


async def _max_stall(render: object, inline: bool) -> float:
    stall = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stall = max(stall, now - last)
            last = now

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.02)
    if inline:
        render()  # type: ignore[operator]
    else:
        await asyncio.to_thread(render)  # type: ignore[arg-type]
    done.set()
    await task
    return stall


def main() -> None:
    """Print the figures."""
    texts = [p.text for p in planted_journal(TODAY, 365)]
    scorer = LexiconScorer()
    vader = _vader()
    scorer.score_now(texts[0])  # load the lexicon before timing
    ours = _time(lambda: [scorer.score_now(x) for x in texts], 3)
    base = _time(lambda: [vader.polarity_scores(x) for x in texts], 3)
    per_ours, per_base = min(ours) / len(texts), min(base) / len(texts)
    print(
        f"scoring, per entry: offline scorer {ms(per_ours)}, plain VADER {ms(per_base)} "
        f"(ratio {per_ours / per_base:.2f}x)"
    )

    year = _entries(365)
    first = TODAY - timedelta(days=364)
    daily = _time(lambda: series(year, "stress", first, TODAY, "day"), 50)
    print("daily series over 365 entries:", summary(daily))
    recent = [e for e in year if e.day > TODAY - timedelta(days=14)]
    before = [e for e in year if TODAY - timedelta(days=28) < e.day <= TODAY - timedelta(days=14)]
    start = TODAY - timedelta(days=13)
    state = _time(lambda: current_state(recent, before, start, TODAY), 200)
    print("current state (14 days):", summary(state))

    month = series(year, "stress", TODAY - timedelta(days=29), TODAY, "day")
    weeks = series(year, "stress", first, TODAY, "week")
    cases: list[tuple[str, list[Point], Bucket]] = [
        ("30 days", month, "day"),
        ("a year by week", weeks, "week"),
    ]
    for label, pts, bucket in cases:
        times = _time(lambda p=pts, b=bucket: render_chart(p, "stress", "Your stress", b), 10)
        size = len(render_chart(pts, "stress", "Your stress", bucket))
        print(f"chart {label}: {summary(times)}, {size / 1024:.0f} KiB")

    def draw() -> bytes:
        return render_chart(weeks, "stress", "Your stress", "week")

    inline = asyncio.run(_max_stall(draw, inline=True))
    threaded = asyncio.run(_max_stall(draw, inline=False))
    print(
        f"event-loop stall while drawing: inline {ms(inline)}, to_thread {ms(threaded)} "
        f"(ratio {inline / threaded:.1f}x)"
    )


if __name__ == "__main__":
    main()
