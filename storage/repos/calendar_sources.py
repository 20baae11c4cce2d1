"""The user's own calendars lifebot reads or writes (ICS feeds, CalDAV); one user at a time."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import CalendarSource


class CalendarSourceRepo:
    """Calendar sources, always scoped by user id (except the refresh job's listing)."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, source: CalendarSource) -> CalendarSource:
        """Store a new source."""
        self.s.add(source)
        await self.s.flush()
        return source

    async def of_user(self, user_id: int, kind: str | None = None) -> list[CalendarSource]:
        """The user's sources (of one kind when given), oldest first."""
        query = select(CalendarSource).where(CalendarSource.user_id == user_id)
        if kind is not None:
            query = query.where(CalendarSource.kind == kind)
        res = await self.s.exec(query.order_by(col(CalendarSource.id)))
        return list(res.all())

    async def get(self, user_id: int, source_id: int) -> CalendarSource | None:
        """One of the user's sources; None when it is not theirs."""
        res = await self.s.exec(
            select(CalendarSource).where(
                CalendarSource.id == source_id, CalendarSource.user_id == user_id
            )
        )
        return res.first()

    async def every(self) -> list[CalendarSource]:
        """Every source of every user (the leader's periodic refresh)."""
        res = await self.s.exec(select(CalendarSource).order_by(col(CalendarSource.id)))
        return list(res.all())

    async def remove(self, user_id: int, source_id: int) -> CalendarSource | None:
        """Delete one of the user's sources; None when it is not theirs."""
        found = await self.get(user_id, source_id)
        if found is not None:
            await self.s.delete(found)
            await self.s.flush()
        return found

    async def record(
        self,
        source_id: int,
        now: datetime,
        *,
        error: str | None,
        count: int | None = None,
        note: str | None = None,
    ) -> bool:
        """Note the outcome of a read: a good one counts the events and clears the error.

        ``note``: what a good read left out (unreadable events), shown where an error is.
        False when the source is gone (removed meanwhile). One UPDATE, which also holds the
        source's row until the transaction ends: a removal waits for the read being stored.
        """
        values: dict[str, object] = {"last_error": error if error is not None else note}
        if error is None:
            values["last_synced_at"] = now
            if count is not None:
                values["event_count"] = count
        stmt = update(CalendarSource).where(col(CalendarSource.id) == source_id).values(**values)
        return int(getattr(await self.s.exec(stmt), "rowcount", 0) or 0) == 1
