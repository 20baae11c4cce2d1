"""Delivery receipts: what was handed to which channel, and the channel's proof."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Delivery


class DeliveryRepo:
    """Records deliveries of replies and pushes."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def record_sent(
        self,
        user_id: int,
        *,
        message_id: int | None,
        channel: str,
        chat_id: str,
        receipt: str,
        kind: str,
        now: datetime,
    ) -> Delivery:
        """Store a delivered message together with the channel's receipt."""
        row = Delivery(
            user_id=user_id,
            kind=kind,
            message_id=message_id,
            channel=channel,
            chat_id=chat_id,
            status="delivered",
            receipt=receipt,
            attempts=1,
            delivered_at=now,
        )
        self.s.add(row)
        await self.s.flush()
        return row

    async def for_user(self, user_id: int, limit: int = 50) -> list[Delivery]:
        """The user's most recent deliveries, newest first."""
        res = await self.s.exec(
            select(Delivery)
            .where(Delivery.user_id == user_id)
            .order_by(col(Delivery.id).desc())
            .limit(limit)
        )
        return list(res.all())
