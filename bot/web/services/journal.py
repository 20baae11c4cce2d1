"""The Journal page's and API's operations: entries, series and charts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from bot.agent.journal.analytics import (
    METRIC_NAMES,
    MIN_ENTRIES,
    Bucket,
    Metric,
    Point,
    series,
)
from bot.agent.journal.chart import describe
from bot.agent.journal.service import JournalService
from bot.clock import Clock, zone
from storage.models import JournalEntry, User

JOURNAL_DAYS = 30
"""The journal page and its charts show this many days unless asked otherwise."""
MAX_SERIES_DAYS = 3660
"""The longest range a chart or a series covers (ten years)."""


@dataclass(slots=True)
class MetricView:
    """One metric of the journal page: its series in words, and whether a chart can be drawn."""

    metric: Metric
    words: str
    drawable: bool
    """At least three scored entries in the range (else the page shows the words only)."""


class WebJournal:
    """The journal of one user at a time."""

    def __init__(self, clock: Clock, journal: JournalService) -> None:
        self.clock = clock
        self.journal = journal

    def journal_range(self, user: User, days: int) -> tuple[date, date]:
        """The last ``days`` days up to today in the user's zone (clamped to a sane span)."""
        today = self.clock.now().astimezone(zone(user.timezone)).date()
        days = max(1, min(days, MAX_SERIES_DAYS))
        return today - timedelta(days=days - 1), today

    async def journal_entries(self, user: User, limit: int = 20) -> list[JournalEntry]:
        """The user's newest journal entries with their scores, newest first."""
        assert user.id is not None
        return await self.journal.recent(user.id, limit)

    async def journal_series(
        self, user: User, metric: Metric, first: date, last: date, bucket: Bucket
    ) -> list[Point]:
        """Averages with counts per bucket of the user's entries (empty buckets included)."""
        assert user.id is not None
        return series(await self.journal.entries(user.id, first, last), metric, first, last, bucket)

    async def journal_views(self, user: User, first: date, last: date) -> list[MetricView]:
        """Every metric over the range in words (the page shows a chart beside each)."""
        assert user.id is not None
        entries = await self.journal.entries(user.id, first, last)
        label = f"{first:%d %b} - {last:%d %b %Y}"
        views = []
        for metric in METRIC_NAMES:
            points = series(entries, metric, first, last, "day")
            drawable = sum(p.count for p in points) >= MIN_ENTRIES
            views.append(MetricView(metric, describe(points, metric, label), drawable))
        return views

    async def journal_chart(
        self, user: User, metric: Metric, first: date, last: date
    ) -> bytes | None:
        """The chart as PNG bytes (drawn in a worker thread); None with too little to draw."""
        assert user.id is not None
        label = f"{first:%d %b} - {last:%d %b %Y}"
        _, image = await self.journal.chart(user.id, metric, first, last, label)
        return image.data if image is not None else None
