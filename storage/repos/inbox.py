"""Messages a channel was answered for before they were handled (``storage.models.inbox``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import InboxItem
from storage.repos._upsert import insert_ignore


class InboxRepo:
    """Keeps, hands over and lets go of one channel account's unhandled messages."""

    def __init__(self, session: AsyncSession, channel: str, account: str) -> None:
        self.s = session
        self.channel = channel
        self.account = account

    async def keep(
        self, chat_id: str, external_id: str, payload: dict[str, Any], now: datetime
    ) -> None:
        """Keep a message (a redelivered one is kept once)."""
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

    async def left(self, before: datetime) -> list[InboxItem]:
        """Messages nobody took on since ``before``, oldest first."""
        query = select(InboxItem).where(
            col(InboxItem.channel) == self.channel,
            col(InboxItem.account) == self.account,
            col(InboxItem.taken_at) < before,
        )
        return list((await self.s.exec(query.order_by(col(InboxItem.id)))).all())

    async def take(self, ids: Sequence[int], before: datetime, now: datetime) -> bool:
        """Take on messages ``left(before)`` read; False (nothing taken) when another was first."""
        res = await self.s.exec(
            update(InboxItem)
            .where(col(InboxItem.id).in_(ids), col(InboxItem.taken_at) < before)
            .values(taken_at=now)
        )
        if int(getattr(res, "rowcount", 0) or 0) == len(ids):
            return True
        await self.s.rollback()
        return False
