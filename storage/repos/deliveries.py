"""Delivery receipts: what was handed to which channel, and the channel's proof."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Delivery, utcnow
from storage.repos._conn import connection_of

_DELIVERIES = Delivery.__table__  # type: ignore[attr-defined]
_INSERT_SENT = sa.insert(_DELIVERIES)
"""Built once: every reply writes one delivery row."""


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
    ) -> None:
        """Store a delivered message together with the channel's receipt (one INSERT)."""
        conn = await connection_of(self.s)
        await conn.execute(
            _INSERT_SENT,
            {
                "user_id": user_id,
                "key": None,
                "kind": kind,
                "message_id": message_id,
                "channel": channel,
                "chat_id": chat_id,
                "status": "delivered",
                "receipt": receipt,
                "attempts": 1,
                "last_error": None,
                "payload": None,  # JSON null, as the ORM stored it
                "due_at": None,
                "created_at": utcnow(),
                "delivered_at": now,
                "account": None,
                "claimed_at": None,
            },
        )

    async def for_user(self, user_id: int, limit: int = 50) -> list[Delivery]:
        """The user's most recent deliveries, newest first."""
        res = await self.s.exec(
            select(Delivery)
            .where(Delivery.user_id == user_id)
            .order_by(col(Delivery.id).desc())
            .limit(limit)
        )
        return list(res.all())
