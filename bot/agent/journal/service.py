"""The journal service: write, edit, import and score entries; keep them in memory search.

Every write goes through ``save``: store (idempotent by source reference), score once (again
only when the text changed), index for memory search, and mark the month and year summaries
of the entry's days stale.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

from bot.agent.journal.analytics import (
    MIN_ENTRIES,
    Bucket,
    CurrentState,
    Metric,
    current_state,
    series,
)
from bot.agent.journal.chart import describe, render_chart
from bot.agent.journal.files import read_journal
from bot.agent.journal.review import notable_change, weekly_review_text
from bot.agent.journal.scoring import Scorer
from bot.agent.journal.summaries import Summaries
from bot.agent.memory.index import MemoryIndex
from bot.clock import Clock, zone
from bot.messages import Image
from storage.db import Database
from storage.models import JournalEntry, JournalSettings, Message
from storage.repos.journal import JournalRepo
from storage.repos.messages import MessageRepo

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
IMPORTED_AT = time(21, 0)
"""An imported file has a date but no time: it counts as written that evening."""


@dataclass(slots=True)
class JournalImportReport:
    """The outcome of one folder import."""

    total: int = 0
    added: int = 0
    edited: int = 0
    unchanged: int = 0
    bad: list[tuple[str, str]] = field(default_factory=list)
    """(file, why it was skipped)."""


class JournalService:
    """Owns the scorer; every write of an entry passes through here."""

    def __init__(
        self,
        db: Database,
        scorer: Scorer,
        index: MemoryIndex,
        clock: Clock,
        summaries: Summaries,
    ) -> None:
        self.db = db
        self.scorer = scorer
        self.index = index
        self.clock = clock
        self.summaries = summaries

    async def write(
        self,
        user_id: int,
        text: str,
        *,
        timezone: str,
        ref: str,
        source: str = "chat",
        written_at: datetime | None = None,
        dedupe_key: str | None = None,
    ) -> tuple[JournalEntry, str]:
        """Store an entry written now (or at ``written_at``); (entry, added|edited|same).

        ``dedupe_key`` names the chat message it was written in: the entry links to it, and
        the message is kept out of search results (the entry is found instead, once).
        """
        when = written_at or self.clock.now()
        day = when.astimezone(zone(timezone)).date()
        msg = None
        if dedupe_key is not None:
            async with self.db.session() as s:
                msg = await JournalRepo(s).message(user_id, dedupe_key)
        result = await self.save(
            user_id, ref=ref, day=day, written_at=when, text=text, source=source,
            message_id=msg.id if msg is not None else None,
        )  # fmt: skip
        if msg is not None:
            await self.index.shadow_messages(user_id, [msg])
        return result

    async def message(self, user_id: int, dedupe_key: str) -> Message | None:
        """The user's own stored message with this dedupe key (None for anyone else's)."""
        async with self.db.session() as s:
            found = await JournalRepo(s).message(user_id, dedupe_key)
        return found if found is not None and found.direction == "in" else None

    async def previous_message(
        self, user_id: int, conversation_id: int, dedupe_key: str
    ) -> Message | None:
        """What the user said in the conversation just before the message ``dedupe_key``."""
        async with self.db.session() as s:
            return await MessageRepo(s).said_before(user_id, conversation_id, dedupe_key)

    @staticmethod
    def message_ref(msg: Message) -> str:
        """The source reference of an entry made from a chat message (same as /journal TEXT)."""
        return f"msg:{msg.dedupe_key}" if msg.dedupe_key else f"message:{msg.id}"

    async def entry_of(self, user_id: int, msg: Message) -> JournalEntry | None:
        """The journal entry made from this message, if any."""
        async with self.db.session() as s:
            return await JournalRepo(s).by_ref(user_id, self.message_ref(msg))

    async def mark(self, user_id: int, msg: Message, *, timezone: str) -> tuple[JournalEntry, str]:
        """Make an earlier message a journal entry, dated when it was said; idempotent."""
        existing = await self.entry_of(user_id, msg)
        if existing is not None:
            return existing, "same"
        when = msg.created_at
        result = await self.save(
            user_id, ref=self.message_ref(msg), day=when.astimezone(zone(timezone)).date(),
            written_at=when, text=msg.text, source="voice" if msg.channel == "device" else "chat",
            message_id=msg.id,
        )  # fmt: skip
        # The message was searchable already: from now on search finds the entry instead.
        await self.index.shadow_messages(user_id, [msg])
        await self.index.hide_messages(user_id, [msg.id or 0])
        return result

    async def save(
        self,
        user_id: int,
        *,
        ref: str,
        day: date,
        written_at: datetime,
        text: str,
        source: str,
        message_id: int | None = None,
    ) -> tuple[JournalEntry, str]:
        """Store, score and index one entry (see the module doc)."""
        async with self.db.session() as s:
            entry, status = await JournalRepo(s).save(
                user_id, ref=ref, day=day, written_at=written_at, text=text.strip(),
                source=source, now=self.clock.now(), message_id=message_id,
            )  # fmt: skip
        if status != "same" or not entry.scorer:
            await self.score(entry)
            await self.index.put_journal([entry])
        return entry, status

    async def edit(self, user_id: int, entry_id: int, text: str) -> JournalEntry | None:
        """Replace an entry's text (scores and summaries follow); None if it is not theirs."""
        async with self.db.session() as s:
            entry = await JournalRepo(s).get(user_id, entry_id)
        if entry is None:
            return None
        edited, _ = await self.save(
            user_id, ref=entry.ref, day=entry.day, written_at=entry.written_at, text=text,
            source=entry.source, message_id=entry.message_id,
        )  # fmt: skip
        return edited

    async def score(self, entry: JournalEntry) -> None:
        """Compute and store an entry's analytics."""
        sc = await self.scorer.score(entry.text)
        entry.happiness, entry.stress, entry.energy = sc.happiness, sc.stress, sc.energy
        entry.themes, entry.people, entry.reason = sc.themes, sc.people, sc.reason
        entry.scorer, entry.scored_at = sc.scorer, self.clock.now()
        async with self.db.session() as s:
            await JournalRepo(s).set_scores(entry)

    async def rescore(self, user_id: int | None = None, progress: Progress | None = None) -> int:
        """Score every entry again (after changing models); summaries become stale."""
        async with self.db.session() as s:
            entries = await JournalRepo(s).all_for(user_id)
        for entry in entries:
            await self.score(entry)
            async with self.db.session() as s:
                await JournalRepo(s).mark_stale(entry.user_id, entry.day)
            if progress is not None:
                progress(1)
        return len(entries)

    async def import_dir(
        self, user_id: int, folder: Path, *, timezone: str, progress: Progress | None = None
    ) -> JournalImportReport:
        """Import every dated file of ``folder``; a second run adds nothing."""
        tz = zone(timezone)
        report = JournalImportReport()
        for name, item in read_journal(folder):
            report.total += 1
            if isinstance(item, str):
                report.bad.append((name, item))
            else:
                when = datetime.combine(item.day, IMPORTED_AT, tz)
                _, status = await self.save(
                    user_id, ref=item.ref, day=item.day, written_at=when, text=item.text,
                    source="import",
                )  # fmt: skip
                if status == "added":
                    report.added += 1
                elif status == "edited":
                    report.edited += 1
                else:
                    report.unchanged += 1
            if progress is not None:
                progress(1)
        await self.index.embed_missing(user_id)
        return report

    async def entries(self, user_id: int, first: date, last: date) -> list[JournalEntry]:
        """The user's entries from ``first`` to ``last`` (inclusive), oldest first."""
        async with self.db.session() as s:
            return await JournalRepo(s).between(user_id, first, last)

    async def recent(self, user_id: int, limit: int = 20) -> list[JournalEntry]:
        """The user's newest ``limit`` entries, newest first."""
        async with self.db.session() as s:
            return await JournalRepo(s).recent(user_id, limit)

    async def current_state(self, user_id: int, today: date, days: int) -> CurrentState:
        """The last ``days`` days up to ``today``, compared with the days before."""
        first = today - timedelta(days=days - 1)
        recent = await self.entries(user_id, first, today)
        before = await self.entries(
            user_id, first - timedelta(days=days), first - timedelta(days=1)
        )
        return current_state(recent, before, first, today)

    async def chart(
        self, user_id: int, metric: Metric, first: date, last: date, label: str
    ) -> tuple[str, Image | None]:
        """(the series in words, a PNG chart or None when there is too little to draw)."""
        days = (last - first).days + 1
        bucket: Bucket = "day" if days <= 45 else "week" if days <= 200 else "month"
        entries = await self.entries(user_id, first, last)
        points = series(entries, metric, first, last, bucket)
        words = describe(points, metric, label)
        if sum(p.count for p in points) < MIN_ENTRIES:
            return words, None
        title = f"Your {metric}, {first:%d %b} - {last:%d %b %Y}"
        # Drawing takes hundreds of ms (bench/journal.py): never on the event loop.
        png = await asyncio.to_thread(render_chart, points, metric, title, bucket)
        return words, Image(png, alt=title, name=f"{metric}.png")

    async def weekly_review(self, user_id: int, last_day: date) -> str | None:
        """The review of the 7 days up to ``last_day``; None with fewer than 3 entries."""
        return weekly_review_text(await self.current_state(user_id, last_day, 7))

    async def notable_change(self, user_id: int, today: date) -> str | None:
        """A sustained recent change worth one line in the briefing, or None."""
        week = await self.entries(user_id, today - timedelta(days=7), today)
        before = await self.entries(user_id, today - timedelta(days=28), today - timedelta(days=8))
        return notable_change(week, before)

    async def review_settings(self, user_id: int) -> JournalSettings:
        """The user's weekly review settings (defaults when never set)."""
        async with self.db.session() as s:
            return await JournalRepo(s).settings(user_id)

    async def set_review(
        self, user_id: int, *, on: bool, weekday: int | None = None, at: str | None = None
    ) -> JournalSettings:
        """Turn the weekly review on (optionally another day or time) or off."""
        async with self.db.session() as s:
            repo = JournalRepo(s)
            row = await repo.settings(user_id)
            row.weekly_review = on
            row.review_weekday = row.review_weekday if weekday is None else weekday
            row.review_time = at or row.review_time
            # Only reviews due after this change are owed (no burst for past weeks).
            row.set_at = self.clock.now()
            await repo.save_settings(row)
            return row
