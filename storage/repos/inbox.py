"""Messages a channel was answered for before they were handled (``storage.models.inbox``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, or_, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import InboxItem, LifebotProcess
from storage.repos._upsert import insert_ignore


@dataclass(frozen=True, slots=True)
class Left:
    """Which messages are left for a process to take on."""

    before: datetime
    """Any message nobody took on since then."""
    holder: str | None = None
    """The process asking (its ``LifebotProcess`` id): it takes on, and never takes over its
    own messages by their holder's silence. None: a process without a heartbeat."""
    silent_since: datetime | None = None
    """Messages of a process that stopped, or was last seen before then, at once (None: only
    ``before`` counts)."""

    def where(self) -> ColumnElement[bool]:
        """The messages' condition (read, and checked again as they are taken on)."""
        orphaned = col(InboxItem.taken_at) < self.before
        if self.silent_since is None:
            return orphaned
        gone = select(LifebotProcess.id).where(
            or_(
                col(LifebotProcess.stopped_at).is_not(None),
                col(LifebotProcess.last_seen_at) < self.silent_since,
            )
        )
        held_by_gone: ColumnElement[bool] = col(InboxItem.taken_by).in_(gone)
        if self.holder is not None:
            held_by_gone = and_(held_by_gone, col(InboxItem.taken_by) != self.holder)
        return or_(orphaned, held_by_gone)


class InboxRepo:
    """Keeps, hands over and lets go of one channel account's unhandled messages."""

    def __init__(self, session: AsyncSession, channel: str, account: str) -> None:
        self.s = session
        self.channel = channel
        self.account = account

    async def keep(
        self,
        chat_id: str,
        external_id: str,
        payload: dict[str, Any],
        now: datetime,
        holder: str | None = None,
    ) -> None:
        """Keep a message, taken on by ``holder`` (a redelivered one is kept once)."""
        table = InboxItem.__table__  # type: ignore[attr-defined]
        stmt = insert_ignore(self.s, table, ["channel", "account", "chat_id", "external_id"])
        row = InboxItem(
            channel=self.channel,
            account=self.account,
            chat_id=chat_id,
            external_id=external_id,
            payload=payload,
            received_at=now,
            taken_at=now,
            taken_by=holder,
        )
        await self.s.exec(stmt.values(**row.model_dump(exclude={"id"})))

    async def forget(self, chat_id: str, external_ids: Sequence[str]) -> None:
        """Let go of handled messages of a chat."""
        await self.s.exec(
            delete(InboxItem).where(
                col(InboxItem.channel) == self.channel,
                col(InboxItem.account) == self.account,
                col(InboxItem.chat_id) == chat_id,
                col(InboxItem.external_id).in_(external_ids),
            )
        )

    async def left(self, left: Left) -> list[InboxItem]:
        """Messages ``left`` finds left, oldest first."""
        query = select(InboxItem).where(
            col(InboxItem.channel) == self.channel,
            col(InboxItem.account) == self.account,
            left.where(),
        )
        return list((await self.s.exec(query.order_by(col(InboxItem.id)))).all())

    async def take(self, ids: Sequence[int], left: Left, now: datetime) -> bool:
        """Take on, for ``left.holder``, messages ``left(left)`` read.

        False (nothing taken) when another was first: they no longer meet ``left``.
        """
        res = await self.s.exec(
            update(InboxItem)
            .where(col(InboxItem.id).in_(ids), left.where())
            .values(taken_at=now, taken_by=left.holder)
        )
        if int(getattr(res, "rowcount", 0) or 0) == len(ids):
            return True
        await self.s.rollback()
        return False
