"""lifebot's own calendar and the proposed events waiting for a yes or no; one user at a time."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import CalendarEvent, Proposal

MERGE_WINDOW = timedelta(hours=1)
"""Same title and starts within this of each other: the same event."""


@dataclass(frozen=True, slots=True)
class OutsideEvent:
    """An event occurrence read from an outside calendar, as the repo stores it."""

    key: str
    """Stable identity in its source (UID plus original start)."""
    title: str
    """The title."""
    start: datetime
    """Start (aware)."""
    end: datetime
    """End (aware)."""
    all_day: bool
    """Whole local days."""
    place: str | None
    """Where, when given."""


@dataclass(frozen=True, slots=True)
class SyncCounts:
    """What one read of an outside calendar changed."""

    added: int
    """New occurrences."""
    updated: int
    """Occurrences whose title, time or place changed."""
    removed: int
    """Occurrences gone from the source (cancelled here)."""
    unchanged: int
    """Occurrences seen again as they were."""
    skipped: int = 0
    """Events of the document that could not be read (left out, the rest stored)."""


def outside_uid(user_id: int, source: str, key: str) -> str:
    """The row uid of an outside occurrence: the same on every re-read, unique per user.

    The owner's id and the source (``ics:12``) stand in front as text, so an import that
    gives them new ids rewrites them (the calendar feature's references) and a re-read there
    finds the row; only the occurrence's own key is hashed. (Hashing the ids too made the
    same event of one calendar file, read by user 1 of two lifebots, one uid: a move refused.)
    """
    digest = hashlib.sha256(key.encode()).hexdigest()[:40]
    return f"{user_id}/{source}/{digest}@{source.split(':', 1)[0]}.lifebot"


def _older_outside_uid(user_id: int, source: str, key: str) -> str:
    """The uid versions before 2026-11 gave an outside occurrence (its ids hashed too)."""
    digest = hashlib.sha256(f"{user_id}|{source}|{key}".encode()).hexdigest()[:40]
    return f"{digest}@{source.split(':', 1)[0]}.lifebot"


def title_key(title: str) -> str:
    """A title reduced to what identifies it: lower case, words only, no articles."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return " ".join(w for w in words if w not in {"a", "an", "the", "with", "at"})


class CalendarRepo:
    """Events and proposals, always scoped by user id."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def events_at_place(
        self, user_id: int, names: list[str], before: datetime, *, limit: int = 10
    ) -> list[CalendarEvent]:
        """The user's latest events at a place called one of ``names`` (any case), newest first.

        Only events starting before ``before`` count.
        """
        wanted = [n.strip().lower() for n in names if n.strip()]
        if not wanted:
            return []
        res = await self.s.exec(
            select(CalendarEvent)
            .where(
                CalendarEvent.user_id == user_id,
                col(CalendarEvent.cancelled_at).is_(None),
                col(CalendarEvent.start_at) < before,
                func.lower(col(CalendarEvent.place)).in_(wanted),
            )
            .order_by(col(CalendarEvent.start_at).desc())
            .limit(limit)
        )
        return list(res.all())

    async def events_between(
        self, user_id: int, start: datetime, end: datetime, *, limit: int | None = 200
    ) -> list[CalendarEvent]:
        """The user's events overlapping [start, end), by start time (``limit``: None, all)."""
        query = (
            select(CalendarEvent)
            .where(
                CalendarEvent.user_id == user_id,
                col(CalendarEvent.cancelled_at).is_(None),
                col(CalendarEvent.start_at) < end,
                col(CalendarEvent.end_at) > start,
            )
            .order_by(col(CalendarEvent.start_at), col(CalendarEvent.id))
        )
        res = await self.s.exec(query if limit is None else query.limit(limit))
        return list(res.all())

    async def all_events(self, user_id: int) -> list[CalendarEvent]:
        """Every live event of the user (for export)."""
        res = await self.s.exec(
            select(CalendarEvent)
            .where(CalendarEvent.user_id == user_id, col(CalendarEvent.cancelled_at).is_(None))
            .order_by(col(CalendarEvent.start_at))
        )
        return list(res.all())

    async def same_event(self, user_id: int, key: str, start: datetime) -> CalendarEvent | None:
        """A live event with the same title key starting within an hour of ``start``."""
        res = await self.s.exec(
            select(CalendarEvent)
            .where(
                CalendarEvent.user_id == user_id,
                CalendarEvent.title_key == key,
                col(CalendarEvent.cancelled_at).is_(None),
                col(CalendarEvent.start_at) >= start - MERGE_WINDOW,
                col(CalendarEvent.start_at) <= start + MERGE_WINDOW,
            )
            .order_by(col(CalendarEvent.id))
        )
        return res.first()

    async def add_or_merge(
        self,
        user_id: int,
        *,
        title: str,
        start: datetime,
        end: datetime,
        place: str | None,
        people: list[str] | None,
        source: str,
        now: datetime,
    ) -> tuple[CalendarEvent, bool]:
        """Create an event, or merge into the same one (same title within an hour).

        Returns (event, merged). Merging fills in a missing place and adds new people.
        """
        key = title_key(title)
        existing = await self.same_event(user_id, key, start)
        if existing is not None:
            if place and not existing.place:
                existing.place = place
            if people:
                known = list(existing.people or [])
                existing.people = known + [p for p in people if p not in known]
            existing.updated_at = now
            self.s.add(existing)
            await self.s.flush()
            return existing, True
        event = CalendarEvent(
            user_id=user_id,
            uid=f"{uuid.uuid4()}@lifebot",
            title=title.strip(),
            title_key=key,
            start_at=start,
            end_at=max(end, start),
            place=place or None,
            people=people or None,
            source=source,
            created_at=now,
            updated_at=now,
        )
        self.s.add(event)
        await self.s.flush()
        return event, False

    async def sync_outside(
        self,
        user_id: int,
        source: str,
        events: Sequence[OutsideEvent],
        now: datetime,
        *,
        remove_missing: bool,
    ) -> SyncCounts:
        """Store a source's occurrences by their stable uid (a re-read never duplicates).

        With ``remove_missing`` (a feed, which is always the whole calendar) occurrences
        this read did not return are cancelled; a file import only adds and updates.
        """
        res = await self.s.exec(
            select(CalendarEvent).where(
                CalendarEvent.user_id == user_id, CalendarEvent.source == source
            )
        )
        known = {e.uid: e for e in res.all()}
        added = updated = unchanged = 0
        seen: set[str] = set()
        for ev in events:
            uid = outside_uid(user_id, source, ev.key)
            seen.add(uid)
            row = known.get(uid)
            older = None if row else known.pop(_older_outside_uid(user_id, source, ev.key), None)
            if older is not None:  # stored by an older version: its row, under the new uid
                older.uid = uid
                row = known[uid] = older
                self.s.add(row)
            if row is None:
                row = CalendarEvent(
                    user_id=user_id,
                    uid=uid,
                    title=ev.title,
                    start_at=ev.start,
                    end_at=ev.end,
                    source=source,
                    created_at=now,
                )
                added += 1
            elif (
                row.title == ev.title
                and row.start_at == ev.start
                and row.end_at == ev.end
                and row.place == ev.place
                and row.all_day == ev.all_day
                and row.cancelled_at is None
            ):
                unchanged += 1
                continue
            else:
                updated += 1
            row.title = ev.title
            row.title_key = title_key(ev.title)
            row.start_at, row.end_at = ev.start, max(ev.end, ev.start)
            row.place, row.all_day = ev.place, ev.all_day
            row.cancelled_at = None
            row.updated_at = now
            self.s.add(row)
        removed = 0
        if remove_missing:
            for uid, row in known.items():
                if uid not in seen and row.cancelled_at is None:
                    row.cancelled_at = now
                    self.s.add(row)
                    removed += 1
        await self.s.flush()
        return SyncCounts(added, updated, removed, unchanged)

    async def own_uids(self, user_id: int) -> set[str]:
        """Uids of the user's events that lifebot made (not read from outside)."""
        res = await self.s.exec(
            select(CalendarEvent.uid).where(
                CalendarEvent.user_id == user_id,
                col(CalendarEvent.source).not_in(["import"]),
                ~col(CalendarEvent.source).like("ics:%"),
                ~col(CalendarEvent.source).like("caldav:%"),
            )
        )
        return set(res.all())

    async def drop_source(self, user_id: int, source: str) -> int:
        """Delete every event a source brought in (the source was removed); how many."""
        res = await self.s.exec(
            select(CalendarEvent).where(
                CalendarEvent.user_id == user_id, CalendarEvent.source == source
            )
        )
        rows = list(res.all())
        for row in rows:
            await self.s.delete(row)
        await self.s.flush()
        return len(rows)

    async def cancel_event(
        self, user_id: int, event_id: int, now: datetime
    ) -> CalendarEvent | None:
        """Cancel one of the user's events; None when it is not theirs."""
        res = await self.s.exec(
            select(CalendarEvent).where(
                CalendarEvent.id == event_id,
                CalendarEvent.user_id == user_id,
                col(CalendarEvent.cancelled_at).is_(None),
            )
        )
        event = res.first()
        if event is not None:
            event.cancelled_at = now
            self.s.add(event)
        return event

    # --- proposals ------------------------------------------------------------------------

    async def add_proposal(self, proposal: Proposal) -> Proposal:
        """Store a new proposal."""
        self.s.add(proposal)
        await self.s.flush()
        return proposal

    async def similar_pending(self, user_id: int, key: str, start: datetime) -> Proposal | None:
        """A pending proposal with the same title key within an hour of ``start``."""
        res = await self.s.exec(
            select(Proposal).where(
                Proposal.user_id == user_id,
                Proposal.title_key == key,
                Proposal.status == "pending",
                col(Proposal.start_at) >= start - MERGE_WINDOW,
                col(Proposal.start_at) <= start + MERGE_WINDOW,
            )
        )
        return res.first()

    async def proposal(self, user_id: int, proposal_id: int) -> Proposal | None:
        """One of the user's proposals."""
        res = await self.s.exec(
            select(Proposal).where(Proposal.id == proposal_id, Proposal.user_id == user_id)
        )
        return res.first()

    async def pending_proposals(self, user_id: int, now: datetime) -> list[Proposal]:
        """The user's unanswered, unexpired proposals."""
        res = await self.s.exec(
            select(Proposal)
            .where(
                Proposal.user_id == user_id,
                Proposal.status == "pending",
                col(Proposal.expires_at) > now,
            )
            .order_by(col(Proposal.start_at))
        )
        return list(res.all())

    async def expire_due(self, now: datetime) -> list[Proposal]:
        """Mark every pending proposal past its expiry as expired; return them."""
        res = await self.s.exec(
            select(Proposal).where(Proposal.status == "pending", col(Proposal.expires_at) <= now)
        )
        expired = list(res.all())
        for p in expired:
            p.status = "expired"
            p.answered_at = now
            self.s.add(p)
        return expired
