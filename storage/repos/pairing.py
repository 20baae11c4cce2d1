"""Pairing codes (strangers asking in) and link codes (one person, two channels)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import PairingRequest


class PairingRepo:
    """Stores and looks up pairing and link codes."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def pending_for_sender(
        self, channel: str, account: str, sender_id: str, now: datetime
    ) -> PairingRequest | None:
        """This sender's unexpired pending pairing request, if any."""
        res = await self.s.exec(
            select(PairingRequest).where(
                PairingRequest.channel == channel,
                PairingRequest.account == account,
                PairingRequest.sender_id == sender_id,
                PairingRequest.purpose == "pair",
                PairingRequest.status == "pending",
                col(PairingRequest.expires_at) > now,
            )
        )
        return res.first()

    async def count_pending(self, channel: str, now: datetime) -> int:
        """How many unexpired pairing requests wait on one channel."""
        res = await self.s.exec(
            select(func.count()).where(
                PairingRequest.channel == channel,
                PairingRequest.purpose == "pair",
                PairingRequest.status == "pending",
                col(PairingRequest.expires_at) > now,
            )
        )
        return int(res.one())

    async def add(self, req: PairingRequest) -> PairingRequest:
        """Store a new request."""
        self.s.add(req)
        await self.s.flush()
        return req

    async def by_code(self, code: str, now: datetime, purpose: str) -> PairingRequest | None:
        """An unexpired pending request with this code and purpose."""
        res = await self.s.exec(
            select(PairingRequest).where(
                PairingRequest.code == code.strip().upper(),
                PairingRequest.purpose == purpose,
                PairingRequest.status == "pending",
                col(PairingRequest.expires_at) > now,
            )
        )
        return res.first()

    async def link_questions(self, user_id: int, now: datetime) -> list[PairingRequest]:
        """Unanswered, unexpired "link this chat to your account?" questions for a user."""
        res = await self.s.exec(
            select(PairingRequest)
            .where(
                PairingRequest.user_id == user_id,
                PairingRequest.purpose == "link_confirm",
                PairingRequest.status == "pending",
                col(PairingRequest.expires_at) > now,
            )
            .order_by(col(PairingRequest.id))
        )
        return list(res.all())

    async def claim(
        self,
        code: str,
        now: datetime,
        purpose: str,
        status: str,
        *,
        user_id: int | None = None,
    ) -> PairingRequest | None:
        """Use up a pending code at most once, even when several senders race for it.

        The status moves from ``pending`` in one conditional UPDATE; only the caller whose
        UPDATE changed the row gets the request back, every other caller gets None.
        """
        req = await self.by_code(code, now, purpose)
        if req is None or req.id is None or (user_id is not None and req.user_id != user_id):
            return None
        res = await self.s.exec(
            update(PairingRequest)
            .where(
                col(PairingRequest.id) == req.id,
                col(PairingRequest.status) == "pending",
                col(PairingRequest.expires_at) > now,
            )
            .values(status=status)
        )
        if int(getattr(res, "rowcount", 0) or 0) != 1:
            return None
        await self.s.refresh(req)
        return req

    async def replace_links(self, user_id: int, status: str = "replaced") -> None:
        """Retire a user's pending link codes: the newest code is the only one that works."""
        await self.s.exec(
            update(PairingRequest)
            .where(
                col(PairingRequest.user_id) == user_id,
                col(PairingRequest.purpose) == "link",
                col(PairingRequest.status) == "pending",
            )
            .values(status=status)
        )

    async def pending(self, now: datetime) -> list[PairingRequest]:
        """Every unexpired pending pairing request, oldest first."""
        res = await self.s.exec(
            select(PairingRequest)
            .where(
                PairingRequest.purpose == "pair",
                PairingRequest.status == "pending",
                col(PairingRequest.expires_at) > now,
            )
            .order_by(col(PairingRequest.id))
        )
        return list(res.all())

    async def close(self, req: PairingRequest, status: str) -> None:
        """Mark a request approved, used or expired."""
        req.status = status
        self.s.add(req)
