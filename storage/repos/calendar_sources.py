"""The user's own calendars lifebot reads or writes (ICS feeds, CalDAV); one user at a time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import CalendarSource
from storage.repos._upsert import add_unless_taken


class CalendarSourceRepo:
    """Calendar sources, always scoped by user id (except the refresh job's listing)."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, source: CalendarSource) -> tuple[CalendarSource, bool]:
        """Store a new source: (it, True); (the one linked first, False) when the user has one.

        One source per user, kind and address (a unique index): two requests linking one
        address at once get what they would one after the other. The loser's insert is rolled
        back to a savepoint and it gets the source the winner stored.
        """
        refused = await add_unless_taken(self.s, source)
        if refused is None:
            return source, True
        known = await self.linked(source.user_id, source.kind, source.url)  # linked meanwhile
        if known is None:
            raise refused
        return known, False

    async def linked(self, user_id: int, kind: str, url: str) -> CalendarSource | None:
        """The user's source of this kind at exactly this address (None: not linked)."""
        res = await self.s.exec(
            select(CalendarSource).where(
                CalendarSource.user_id == user_id,
                CalendarSource.kind == kind,
                CalendarSource.url == url,
            )
        )
        return res.first()

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


def settle_twin_sources(data: dict[str, list[dict[str, Any]]]) -> int:
    """In an export's rows, merge each later copy of a linked calendar into the first one.

    The database keeps one source per user, kind and address (migration 0024); older versions
    could link one twice (requests at once), and their exports would be refused whole. As
    the upgrade merges a database's copies: a copy's event the first also has goes (a
    proposal merged into it then points at the first's), any other moves to the first (its
    ``source`` and uid front renamed); the copy goes. Returns how many copies were merged.
    """
    first: dict[tuple[str, str, str], Any] = {}
    kept: list[dict[str, Any]] = []
    merged: dict[str, tuple[str, str]] = {}
    """A copy's ``kind:id`` → (the first's ``kind:id``, the owner's id)."""
    for row in data.get("calendarsource") or []:
        key = (str(row.get("user_id")), str(row.get("kind")), str(row.get("url")))
        if key in first:
            merged[f"{row.get('kind')}:{row.get('id')}"] = (
                f"{row.get('kind')}:{first[key]}",
                str(row.get("user_id")),
            )
        else:
            first[key] = row.get("id")
            kept.append(row)
    if not merged:
        return 0
    data["calendarsource"] = kept
    events = data.get("calendarevent") or []
    staying = [e for e in events if str(e.get("source")) not in merged]
    by_uid = {str(e.get("uid")): e.get("id") for e in staying}
    by_time = {_when(e): e.get("id") for e in staying if _from_source(e)}
    twin_of: dict[str, Any] = {}
    for event in events:
        tag = str(event.get("source"))
        if tag not in merged:
            continue
        into, user = merged[tag]
        uid, old_front = str(event.get("uid")), f"{user}/{tag}/"
        if uid.startswith(old_front):
            uid = f"{user}/{into}/{uid[len(old_front) :]}"
        twin = by_uid.get(uid)
        if twin is None and by_time.get(_when(event, into)) is not None:
            twin = by_time[_when(event, into)]
        if twin is not None:
            twin_of[str(event.get("id"))] = twin
        else:
            event.update(source=into, uid=uid)
            staying.append(event)
            by_uid[uid] = event.get("id")
    data["calendarevent"] = staying
    for proposal in data.get("proposal") or []:
        if str(proposal.get("event_id")) in twin_of:
            proposal["event_id"] = twin_of[str(proposal.get("event_id"))]
    return len(merged)


def _from_source(event: dict[str, Any]) -> bool:
    """Whether an exported event row came from a linked calendar (``ics:``/``caldav:``)."""
    return str(event.get("source")).startswith(("ics:", "caldav:"))


def _when(event: dict[str, Any], source: str | None = None) -> tuple[str, ...]:
    """What finds an event's twin when its uid is an older version's: source, title, times."""
    return (
        source or str(event.get("source")),
        str(event.get("title_key")),
        str(event.get("start_at")),
        str(event.get("end_at")),
    )
