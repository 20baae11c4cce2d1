"""Leader election: with several ``serve`` processes on one database, one runs the jobs.

A lease row (``joblease``) renewed by a heartbeat, on SQLite and PostgreSQL alike. When the
holder stops renewing (dead, frozen by SIGSTOP, cut off) the lease runs out and the next
process to look takes it over, with the lease's fencing token one higher. Writes only the
leader may make carry its :class:`~storage.repos.leases.Fence`, so a frozen leader that wakes
up after a takeover has them refused and steps down at its next heartbeat.

(An advisory lock is not used for this: a frozen leader keeps its connection, and with it the
lock, for as long as it is frozen; a host that vanishes keeps it until TCP keepalive gives up.)
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import Protocol

from storage.db import Database
from storage.repos.leases import Fence, LeaseRepo

log = logging.getLogger(__name__)


def holder_id() -> str:
    """Who this process is, readable in ``lifebot jobs``: host, pid and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaderLock(Protocol):
    """A lock only one process holds; ``acquire`` is called again as the heartbeat."""

    holder: str

    async def acquire(self, now: datetime) -> bool:
        """Take or keep the lock; False when another process holds it (or it was lost)."""
        ...

    async def release(self) -> None:
        """Give the lock up (on a clean stop)."""
        ...

    @property
    def fence(self) -> Fence | None:
        """The proof of leadership the leader's writes carry (None while not leading)."""
        ...


class LeaseLock:
    """A lease row renewed by each ``acquire``; expires ``ttl`` after the last renewal."""

    def __init__(
        self,
        db: Database,
        holder: str | None = None,
        *,
        ttl: timedelta = timedelta(seconds=10),
        name: str = "scheduler",
    ) -> None:
        self.db = db
        self.holder = holder or holder_id()
        self.ttl = ttl
        self.name = name
        self._fence: Fence | None = None

    @property
    def fence(self) -> Fence | None:
        """Our lease and its token while we hold it."""
        return self._fence

    async def acquire(self, now: datetime) -> bool:
        """Renew our lease, else take an expired one (or create the first one)."""
        until = now + self.ttl
        async with self.db.session() as s:
            repo = LeaseRepo(s)
            await repo.bound()
            if self._fence is not None:
                if await repo.renew(self._fence, now, until):
                    return True
                log.warning("the scheduler lease was taken over (token %s)", self._fence.token)
                self._fence = None
            self._fence = await repo.take(self.name, self.holder, now, until)
        return self._fence is not None

    async def release(self) -> None:
        """Expire our lease now so another process can take over at once."""
        fence, self._fence = self._fence, None
        if fence is None:
            return
        async with self.db.session() as s:
            repo = LeaseRepo(s)
            await repo.bound()
            await repo.give_up(fence)


def leader_lock(db: Database, ttl: timedelta) -> LeaderLock:
    """The leader lock: a lease with a fencing token on every database."""
    return LeaseLock(db, ttl=ttl)
