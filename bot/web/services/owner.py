"""The owner's pages' operations: pairings, users, deliveries, jobs and channels.

Not scoped to one user: only the owner reaches them (``bot.web.deps.owner``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.adapters.base import ChannelAdapter
from bot.agent.accounts import Accounts
from bot.clock import Clock
from bot.dispatch.identity import approve
from bot.jobs.service import Jobs
from storage.db import Database
from storage.models import ChannelIdentity, Delivery, JobLease, JobState, PairingRequest, User


@dataclass(slots=True)
class UserRow:
    """A user with their linked channels (owner page)."""

    user: User
    identities: list[ChannelIdentity]


class WebOwner:
    """What the owner sees and decides for everyone."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        accounts: Accounts,
        jobs: Jobs,
        channels: Mapping[str, ChannelAdapter],
        default_timezone: str,
    ) -> None:
        self.db = db
        self.clock = clock
        self.accounts = accounts
        self.jobs = jobs
        self.channels = channels
        self.default_timezone = default_timezone
        """The zone an approved person starts with."""

    async def pairings(self) -> list[PairingRequest]:
        """Pending pairing requests."""
        return await self.accounts.pairings(self.clock.now())

    async def decide_pairing(self, code: str, yes: bool) -> PairingRequest | None:
        """Approve (the person becomes a user) or refuse; None when the code is not pending."""
        now = self.clock.now()
        if not yes:
            return await self.accounts.refuse(code, now)
        async with self.db.session() as s:
            req = await approve(s, code, now, self.default_timezone)
        if req is not None and req.user_id is not None:
            # The welcome the chat /approve sends, through the outbox (exactly once).
            await self.jobs.views.notice(
                req.user_id,
                f"welcome:{req.code}",
                "You're approved! Say hi, or send /help to see what I can do.",
                now,
            )
        return req

    async def users(self) -> list[UserRow]:
        """Every user and their channels."""
        return [UserRow(u, ids) for u, ids in await self.accounts.every()]

    async def deliveries(self, limit: int = 100) -> list[Delivery]:
        """The newest pushes of everyone."""
        return await self.jobs.views.deliveries(limit)

    async def retry_delivery(self, delivery_id: int) -> bool:
        """Queue a failed push again."""
        return await self.jobs.views.retry_delivery(delivery_id, self.clock.now())

    async def job_states(self) -> tuple[list[JobState], list[JobLease]]:
        """Scheduled jobs' last runs and the leader leases."""
        return await self.jobs.views.job_states()

    def is_leader(self) -> bool:
        """True when this process runs the scheduled jobs."""
        return self.jobs.service.is_leader

    def channel_names(self) -> list[str]:
        """Channels started in this process (the web page's own way back is not one)."""
        return sorted(name for name in self.channels if name != "web")
