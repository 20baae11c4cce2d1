"""The leader lease: one row per lease name, a holder, an expiry and a fencing token.

The token grows by one at every takeover. Writes only the leader may make carry the token
they were made under (:class:`Fence`); once another process has taken over, the old token no
longer matches and a stale leader (frozen, then resumed) has its writes refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exists, update
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import JobLease
from storage.repos._conn import bound_idle
from storage.repos._upsert import insert_ignore


@dataclass(frozen=True, slots=True)
class Fence:
    """Proof of leadership a write is made under: lease name, holder and token."""

    name: str
    """Which lease (``scheduler``)."""
    holder: str
    """Who held it (host:pid:random)."""
    token: int
    """The lease's token when it was taken."""

    def holds(self, now: datetime) -> Any:
        """A SQL condition: this lease is still ours and unexpired at ``now``."""
        return exists().where(
            col(JobLease.name) == self.name,
            col(JobLease.holder) == self.holder,
            col(JobLease.token) == self.token,
            col(JobLease.expires_at) >= now,
        )


class LeaseRepo:
    """Takes, renews and gives up leases; each method is one or two statements."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def bound(self) -> None:
        """End this transaction if its process freezes half-way (``bound_idle``); call first.

        A leader frozen between its heartbeat's UPDATE of the lease row and the COMMIT would
        keep that row locked, and every other process's attempt to take the lease would wait
        on it for as long as the leader stayed frozen: no process would lead.
        """
        await bound_idle(self.s)

    async def renew(self, fence: Fence, now: datetime, until: datetime) -> bool:
        """Extend our lease; False when someone else took it over meanwhile."""
        stmt = (
            update(JobLease)
            .where(
                col(JobLease.name) == fence.name,
                col(JobLease.holder) == fence.holder,
                col(JobLease.token) == fence.token,
            )
            .values(expires_at=until, heartbeat_at=now)
        )
        return int(getattr(await self.s.exec(stmt), "rowcount", 0) or 0) == 1

    async def take(self, name: str, holder: str, now: datetime, until: datetime) -> Fence | None:
        """Take an expired lease (or create the first one); None while another holds it."""
        stmt = (
            update(JobLease)
            .where(col(JobLease.name) == name, col(JobLease.expires_at) < now)
            .values(
                holder=holder, token=col(JobLease.token) + 1, expires_at=until, heartbeat_at=now
            )
            .returning(col(JobLease.token))
        )
        row = (await self.s.exec(stmt)).first()
        if row is not None:
            return Fence(name, holder, int(row[0]))
        ins = insert_ignore(self.s, JobLease, ["name"]).values(
            name=name, holder=holder, token=1, expires_at=until, heartbeat_at=now
        )
        if int(getattr(await self.s.exec(ins), "rowcount", 0) or 0) == 1:
            return Fence(name, holder, 1)
        return None

    async def give_up(self, fence: Fence) -> None:
        """Expire our lease now so another process can take over at once."""
        await self.s.exec(
            update(JobLease)
            .where(
                col(JobLease.name) == fence.name,
                col(JobLease.holder) == fence.holder,
                col(JobLease.token) == fence.token,
            )
            .values(expires_at=datetime(1970, 1, 1, tzinfo=UTC))
        )
