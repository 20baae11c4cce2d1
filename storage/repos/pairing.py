"""Pairing codes (strangers asking in) and link codes (one person, two channels)."""

from __future__ import annotations

from datetime import datetime

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
