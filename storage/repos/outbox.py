"""The outbox: scheduled pushes as Delivery rows with a unique key, moved through their states.

pending → sending → delivered (receipt stored), or back to pending (retry), failed, skipped,
uncertain (the process stopped while the channel had it and the channel cannot be asked).
Every transition is a conditional UPDATE so two workers can never both send one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Delivery
from storage.repos._conn import bound_idle
from storage.repos._upsert import insert_ignore
from storage.repos.leases import Fence

SCHEDULED_KINDS = ("briefing", "reminder", "proposal", "notice", "journal_review")
_INSERT_CHUNK = 500
"""Rows per INSERT: keeps SQLite under its bound-parameter limit."""


@dataclass(slots=True)
class Push:
    """A push to put in the outbox."""

    user_id: int
    kind: str
    key: str
    """Unique: (user, kind, local date or reminder id). The same key is never sent twice."""
    due_at: datetime
    text: str | None = None
    """None: composed just before sending (briefings)."""
    buttons: list[tuple[str, str] | tuple[str, str, int]] = field(default_factory=list)
    """(label, data) or (label, data, row): buttons with one row number share a row."""
    urgent: bool = False
    """Urgent pushes (reminders the user timed) are not held back by quiet hours."""
    status: str = "pending"
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self, now: datetime) -> dict[str, Any]:
        """Column values for an insert."""
        payload = {"text": self.text, "buttons": self.buttons, "urgent": self.urgent}
        payload.update(self.extra)
        payload.setdefault("scheduled_for", self.due_at.isoformat())
        return {
            "user_id": self.user_id,
            "key": self.key,
            "kind": self.kind,
            "status": self.status,
            "attempts": 0,
            "payload": payload,
            "due_at": self.due_at,
            "created_at": now,
            "last_error": self.note,
        }


class OutboxRepo:
    """State changes of outbox rows; each method is one small statement."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def enqueue(self, pushes: Sequence[Push], now: datetime) -> int:
        """Insert pushes whose key is new; returns how many were new."""
        added = 0
        for i in range(0, len(pushes), _INSERT_CHUNK):
            chunk = [p.row(now) for p in pushes[i : i + _INSERT_CHUNK]]
            stmt = insert_ignore(self.s, Delivery, ["key"]).values(chunk)
            result = await self.s.exec(stmt)
            added += max(0, int(getattr(result, "rowcount", 0) or 0))
        return added

    async def keys_since(self, kind: str, since: datetime) -> set[str]:
        """Keys of rows of one kind due since ``since`` (for planners)."""
        res = await self.s.exec(
            select(Delivery.key).where(Delivery.kind == kind, col(Delivery.due_at) >= since)
        )
        return {k for k in res.all() if k}

    async def due(
        self, now: datetime, limit: int, after: tuple[datetime, int] | None = None
    ) -> list[Delivery]:
        """Pending rows due by ``now``, oldest first, after the (due_at, id) ``after`` cursor."""
        q = select(Delivery).where(Delivery.status == "pending", col(Delivery.due_at) <= now)
        if after is not None:
            due, row_id = after
            q = q.where(
                or_(
                    col(Delivery.due_at) > due,
                    and_(col(Delivery.due_at) == due, col(Delivery.id) > row_id),
                )
            )
        q = q.order_by(col(Delivery.due_at), col(Delivery.id)).limit(limit)
        return list((await self.s.exec(q)).all())

    async def next_time(self, after: datetime) -> datetime | None:
        """When the soonest pending row due after ``after`` is due (None: nothing is)."""
        res = await self.s.exec(
            select(func.min(col(Delivery.due_at))).where(
                Delivery.status == "pending", col(Delivery.due_at) > after
            )
        )
        return res.one()

    async def get(self, delivery_id: int) -> Delivery | None:
        """One row."""
        return await self.s.get(Delivery, delivery_id)

    async def set_payload(self, delivery_id: int, payload: dict[str, Any]) -> None:
        """Store composed text and notes (only while pending)."""
        await self._update(delivery_id, ("pending",), payload=payload)

    async def claim(
        self,
        delivery_id: int,
        now: datetime,
        *,
        channel: str,
        account: str,
        chat_id: str,
        message_id: int | None,
        fence: Fence | None = None,
    ) -> bool:
        """Pending → sending, recording the target; False if someone else has it.

        With a ``fence`` the claim also needs the leader lease it was made under to be still
        held: a leader that was frozen and replaced cannot send anything.
        """
        return await self._update(
            delivery_id,
            ("pending",),
            *([fence.holds(now)] if fence is not None else []),
            status="sending",
            claimed_at=now,
            attempts=col(Delivery.attempts) + 1,
            channel=channel,
            account=account,
            chat_id=chat_id,
            message_id=message_id,
        )

    async def retarget(self, delivery_id: int, *, channel: str, account: str, chat_id: str) -> None:
        """Point a row being sent at the next identity (after a permanent failure)."""
        await self._update(
            delivery_id, ("sending",), channel=channel, account=account, chat_id=chat_id
        )

    async def delivered(
        self, delivery_id: int, receipt: str, now: datetime, *, note: str | None = None
    ) -> bool:
        """Sending → delivered, with the channel's message id as proof.

        ``note`` (kept in ``last_error``): it went to a later channel than the first, and why.
        """
        return await self._update(
            delivery_id,
            ("sending",),
            status="delivered",
            receipt=receipt,
            delivered_at=now,
            last_error=note,
        )

    async def release(self, delivery_id: int, due_at: datetime, error: str | None) -> bool:
        """Sending → pending again (a retry later); the row keeps its attempt count."""
        return await self._update(
            delivery_id, ("sending",), status="pending", due_at=due_at, last_error=error
        )

    async def finish(self, delivery_id: int, status: str, reason: str, *, from_: str) -> bool:
        """Close a row as failed, skipped or uncertain, with the reason in plain words."""
        return await self._update(delivery_id, (from_,), status=status, last_error=reason)

    async def requeue(self, delivery_id: int, now: datetime, *, states: tuple[str, ...]) -> bool:
        """A closed row (failed, skipped...) → pending now, with a fresh attempt count.

        The send goes out on the channel again with the same key (``lifebot jobs retry``).
        """
        payload_row = await self.get(delivery_id)
        if payload_row is None:
            return False
        payload = dict(payload_row.payload or {})
        payload["scheduled_for"] = now.isoformat()  # asked for now: not "late" any more
        return await self._update(
            delivery_id,
            states,
            status="pending",
            due_at=now,
            attempts=0,
            claimed_at=None,
            last_error=None,
            payload=payload,
        )

    async def release_held(self, user_id: int, now: datetime) -> int:
        """Pending pushes of a user held for quiet hours become due now; returns how many.

        The outbox checks quiet hours again when it sends, so releasing is always safe.
        """
        res = await self.s.exec(
            select(Delivery).where(
                Delivery.user_id == user_id,
                Delivery.status == "pending",
                col(Delivery.due_at) > now,
            )
        )
        held = [d for d in res.all() if (d.payload or {}).get("deferred_until")]
        for row in held:
            payload = dict(row.payload or {})
            payload.pop("deferred_until", None)
            await self._update(row.id or 0, ("pending",), due_at=now, payload=payload)
        return len(held)

    async def defer(self, delivery_id: int, until: datetime, payload: dict[str, Any]) -> None:
        """Hold a pending row until ``until`` (quiet hours)."""
        await self._update(delivery_id, ("pending",), due_at=until, payload=payload)

    async def sending(self, claimed_before: datetime) -> list[Delivery]:
        """Rows left in ``sending`` since before ``claimed_before`` (a stopped process)."""
        res = await self.s.exec(
            select(Delivery).where(
                Delivery.status == "sending", col(Delivery.claimed_at) < claimed_before
            )
        )
        return list(res.all())

    async def counts(self) -> dict[str, int]:
        """Scheduled rows per status (for ``lifebot jobs``)."""
        res = await self.s.exec(
            select(Delivery.status, func.count())
            .where(col(Delivery.kind).in_(SCHEDULED_KINDS))
            .group_by(Delivery.status)
        )
        return {status: int(n) for status, n in res.all()}

    async def problems(self, limit: int = 5) -> list[Delivery]:
        """The newest rows that failed, were skipped or are uncertain (for ``lifebot jobs``)."""
        res = await self.s.exec(
            select(Delivery)
            .where(col(Delivery.status).in_(("failed", "uncertain", "skipped")))
            .order_by(col(Delivery.id).desc())
            .limit(limit)
        )
        return list(res.all())

    async def waiting(self, limit: int = 5, user_id: int | None = None) -> list[Delivery]:
        """Pending rows waiting for something (an offline pendant), oldest first.

        ``user_id``: only that user's rows.
        """
        stmt = select(Delivery).where(
            Delivery.status == "pending", col(Delivery.last_error).like("waiting:%")
        )
        if user_id is not None:
            stmt = stmt.where(Delivery.user_id == user_id)
        res = await self.s.exec(stmt.order_by(col(Delivery.id)).limit(limit))
        return list(res.all())

    async def fell_back(self, limit: int = 5) -> list[Delivery]:
        """The newest rows delivered on another channel than the first (for ``lifebot jobs``)."""
        res = await self.s.exec(
            select(Delivery)
            .where(Delivery.status == "delivered", col(Delivery.last_error).like("fell back to %"))
            .order_by(col(Delivery.id).desc())
            .limit(limit)
        )
        return list(res.all())

    async def for_key(self, key: str) -> Delivery | None:
        """The row with this key."""
        return (await self.s.exec(select(Delivery).where(Delivery.key == key))).first()

    async def _update(
        self, delivery_id: int, states: tuple[str, ...], *conds: Any, **values: Any
    ) -> bool:
        # Every state change of a push locks its row; a leader frozen before the COMMIT must
        # not keep it from the next leader (which claims or recovers the same row).
        await bound_idle(self.s)
        stmt = (
            update(Delivery)
            .where(col(Delivery.id) == delivery_id, col(Delivery.status).in_(states), *conds)
            .values(**values)
        )
        result = await self.s.exec(stmt)
        return int(getattr(result, "rowcount", 0) or 0) == 1
