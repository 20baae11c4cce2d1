"""Leader election: with several ``serve`` processes on one database, one runs the jobs.

PostgreSQL: a session advisory lock held on a dedicated connection. If the holder dies its
connection closes, the server drops the lock, and the next process to try gets it.
SQLite (one machine, but possibly several processes): a lease row renewed by a heartbeat;
when the holder stops renewing, the lease expires and another process takes it over.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy import or_, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import col

from storage.db import Database
from storage.models import JobLease
from storage.repos._upsert import insert_ignore

log = logging.getLogger(__name__)

ADVISORY_KEY = 7_140_007
"""The advisory lock id of lifebot's scheduler (any constant shared by all processes)."""


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


class AdvisoryLock:
    """PostgreSQL ``pg_try_advisory_lock`` on a connection kept open while leading."""

    def __init__(self, db: Database, holder: str | None = None, key: int = ADVISORY_KEY) -> None:
        self.db = db
        self.key = key
        self.holder = holder or holder_id()
        self._conn: AsyncConnection | None = None

    async def acquire(self, now: datetime) -> bool:
        """Check the held connection is alive, or try to take the lock on a new one."""
        if self._conn is not None:
            try:
                await self._conn.execute(text("SELECT 1"))
                await self._conn.commit()
            except (SQLAlchemyError, OSError) as exc:
                log.warning("lost the scheduler lock's connection: %s", exc)
                await self._drop()
                return False
            return True
        conn = await self.db.engine.connect()
        try:
            got = (
                await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key})
            ).scalar()
            await conn.commit()
        except BaseException:
            await conn.close()
            raise
        if got:
            self._conn = conn
            return True
        await conn.close()
        return False

    async def release(self) -> None:
        """Unlock and close the connection."""
        if self._conn is None:
            return
        try:
            await self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
            await self._conn.commit()
        except (SQLAlchemyError, OSError) as exc:
            log.info("could not unlock cleanly (the connection closing unlocks): %s", exc)
        await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except (SQLAlchemyError, OSError):
                await conn.invalidate()


class LeaseLock:
    """A lease row (``joblease``) renewed by each ``acquire``; expires ``ttl`` after the last."""

    def __init__(
        self,
        db: Database,
        holder: str | None = None,
        *,
        ttl: timedelta = timedelta(seconds=30),
        name: str = "scheduler",
    ) -> None:
        self.db = db
        self.holder = holder or holder_id()
        self.ttl = ttl
        self.name = name

    async def acquire(self, now: datetime) -> bool:
        """Renew our lease, take an expired one, or create the first one."""
        values = {"holder": self.holder, "expires_at": now + self.ttl, "heartbeat_at": now}
        async with self.db.session() as s:
            stmt = (
                update(JobLease)
                .where(
                    col(JobLease.name) == self.name,
                    or_(col(JobLease.holder) == self.holder, col(JobLease.expires_at) < now),
                )
                .values(**values)
            )
            if int(getattr(await s.exec(stmt), "rowcount", 0) or 0) == 1:
                return True
            ins = insert_ignore(s, JobLease, ["name"]).values(name=self.name, **values)
            return int(getattr(await s.exec(ins), "rowcount", 0) or 0) == 1

    async def release(self) -> None:
        """Expire our lease now so another process can take over at once."""
        async with self.db.session() as s:
            await s.exec(
                update(JobLease)
                .where(col(JobLease.name) == self.name, col(JobLease.holder) == self.holder)
                .values(expires_at=datetime(1970, 1, 1, tzinfo=UTC))
            )


def leader_lock(db: Database, ttl: timedelta) -> LeaderLock:
    """The right lock for the database: advisory on PostgreSQL, a lease elsewhere."""
    if db.url.startswith("postgresql"):
        return AdvisoryLock(db)
    return LeaseLock(db, ttl=ttl)
