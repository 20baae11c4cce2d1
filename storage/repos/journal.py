"""Journal entries, their cached period summaries and per-user journal settings."""

from __future__ import annotations

import hashlib
from datetime import date, datetime

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import JournalEntry, JournalSettings, JournalSummary, Message


def text_hash(text: str) -> str:
    """A short hash of an entry's text (re-imports of unchanged files change nothing)."""
    return hashlib.sha256(text.strip().encode()).hexdigest()[:32]


def periods_of(day: date) -> list[str]:
    """The summary periods a day belongs to: its month and its year."""
    return [f"{day:%Y-%m}", f"{day:%Y}"]


class JournalRepo:
    """All SQL of the journal; every query is scoped to one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def message(self, user_id: int, dedupe_key: str) -> Message | None:
        """The user's stored message with this dedupe key (the one an entry was written in)."""
        res = await self.s.exec(
            select(Message).where(Message.user_id == user_id, Message.dedupe_key == dedupe_key)
        )
        return res.first()

    async def by_ref(self, user_id: int, ref: str) -> JournalEntry | None:
        """The entry with this source reference."""
        res = await self.s.exec(
            select(JournalEntry).where(JournalEntry.user_id == user_id, JournalEntry.ref == ref)
        )
        return res.first()

    async def get(self, user_id: int, entry_id: int) -> JournalEntry | None:
        """One of this user's entries (None for another user's)."""
        res = await self.s.exec(
            select(JournalEntry).where(JournalEntry.user_id == user_id, JournalEntry.id == entry_id)
        )
        return res.first()

    async def save(
        self,
        user_id: int,
        *,
        ref: str,
        day: date,
        written_at: datetime,
        text: str,
        source: str,
        now: datetime,
        message_id: int | None = None,
    ) -> tuple[JournalEntry, str]:
        """Insert or update by ``ref``; returns (entry, ``added`` | ``edited`` | ``same``).

        An edit clears the scores (they are recomputed) and marks the summaries of the old and
        the new day's periods stale.
        """
        h = text_hash(text)
        entry = await self.by_ref(user_id, ref)
        if entry is not None and entry.text_hash == h and entry.day == day:
            return entry, "same"
        status = "edited"
        if entry is None:
            status = "added"
            entry = JournalEntry(user_id=user_id, ref=ref, day=day, written_at=written_at, text="")
            entry.created_at = now
        else:
            await self.mark_stale(user_id, entry.day)
        entry.day, entry.written_at, entry.text, entry.text_hash = day, written_at, text, h
        entry.source, entry.message_id, entry.updated_at = source, message_id, now
        entry.scorer, entry.scored_at = "", None
        self.s.add(entry)
        await self.s.flush()
        await self.mark_stale(user_id, day)
        return entry, status

    async def set_scores(self, entry: JournalEntry) -> None:
        """Store an entry's computed analytics."""
        self.s.add(entry)
        await self.s.flush()

    async def between(self, user_id: int, first: date, last: date) -> list[JournalEntry]:
        """The user's entries with ``first <= day <= last``, oldest first."""
        res = await self.s.exec(
            select(JournalEntry)
            .where(
                JournalEntry.user_id == user_id,
                col(JournalEntry.day) >= first,
                col(JournalEntry.day) <= last,
            )
            .order_by(col(JournalEntry.day), col(JournalEntry.id))
        )
        return list(res.all())

    async def recent(self, user_id: int, limit: int) -> list[JournalEntry]:
        """The user's newest ``limit`` entries, newest first."""
        res = await self.s.exec(
            select(JournalEntry)
            .where(JournalEntry.user_id == user_id)
            .order_by(col(JournalEntry.day).desc(), col(JournalEntry.id).desc())
            .limit(limit)
        )
        return list(res.all())

    async def all_for(self, user_id: int | None = None) -> list[JournalEntry]:
        """Every entry (of one user, or of everyone), oldest first."""
        q = select(JournalEntry).order_by(col(JournalEntry.user_id), col(JournalEntry.day))
        if user_id is not None:
            q = q.where(JournalEntry.user_id == user_id)
        return list((await self.s.exec(q)).all())

    async def mark_stale(self, user_id: int, day: date) -> None:
        """The month and year summaries covering ``day`` no longer match their entries."""
        await self.s.exec(
            update(JournalSummary)
            .where(
                col(JournalSummary.user_id) == user_id,
                col(JournalSummary.period).in_(periods_of(day)),
            )
            .values(stale=True)
        )

    async def summary(self, user_id: int, period: str) -> JournalSummary | None:
        """The cached summary of a period, fresh or stale."""
        res = await self.s.exec(
            select(JournalSummary).where(
                JournalSummary.user_id == user_id, JournalSummary.period == period
            )
        )
        return res.first()

    async def put_summary(
        self, user_id: int, period: str, text: str, by: str, now: datetime
    ) -> JournalSummary:
        """Store (or replace) a period's summary as fresh."""
        row = await self.summary(user_id, period) or JournalSummary(user_id=user_id, period=period)
        row.text, row.by, row.stale, row.generated_at = text, by, False, now
        self.s.add(row)
        await self.s.flush()
        return row

    async def settings(self, user_id: int) -> JournalSettings:
        """The user's journal settings (defaults when never set)."""
        res = await self.s.exec(select(JournalSettings).where(JournalSettings.user_id == user_id))
        return res.first() or JournalSettings(user_id=user_id)

    async def save_settings(self, row: JournalSettings) -> None:
        """Store settings."""
        self.s.add(row)
        await self.s.flush()

    async def review_subscribers(self) -> list[JournalSettings]:
        """Everyone who opted in to the weekly review."""
        res = await self.s.exec(select(JournalSettings).where(col(JournalSettings.weekly_review)))
        return list(res.all())
