"""Queries for issue 16's tables: daily use counters and meeting transcript jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import DocumentChunk, IngestJob, UsageCount
from storage.repos._upsert import insert_ignore, insert_or_update


class UsageRepo:
    """Per-user, per-day counters (the web search cap)."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def take(self, user_id: int, what: str, day: str, cap: int) -> bool:
        """Count one use if fewer than ``cap`` were counted that day; False when the cap is hit.

        One conditional UPDATE, so two processes never both take the last use.
        """
        await self.s.exec(
            insert_ignore(self.s, UsageCount, ["user_id", "what", "day"]).values(
                user_id=user_id, what=what, day=day, count=0
            )
        )
        table = UsageCount.__table__  # type: ignore[attr-defined]  # SQLModel's table
        res = await self.s.exec(
            update(table)
            .where(
                table.c.user_id == user_id,
                table.c.what == what,
                table.c.day == day,
                table.c.count < cap,
            )
            .values(count=table.c.count + 1)
        )
        return bool(res.rowcount)


class IngestRepo:
    """Meeting transcript jobs: submit (replacing a pending one), claim when due, finish."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def submit(
        self, user_id: int, meeting_key: str, body: dict[str, Any], due: datetime, now: datetime
    ) -> IngestJob:
        """Queue a transcript; a pending job of the same meeting gets the newer body instead.

        One upsert on the partial unique index "one pending job per meeting": posts of one
        meeting arriving together (a recorder re-sending its growing transcript) share a job.
        """
        table = IngestJob.__table__  # type: ignore[attr-defined]  # SQLModel's table
        stmt = insert_or_update(
            self.s,
            table,
            {
                "user_id": user_id,
                "meeting_key": meeting_key,
                "body": body,
                "status": "pending",
                "due_at": due,
                "attempts": 0,
                "created_at": now,
                "updated_at": now,
            },
            conflict=["user_id", "meeting_key"],
            # Resetting the attempts tells a run of the older body that it was replaced.
            update=["body", "due_at", "attempts", "updated_at"],
            where=table.c.status == "pending",
        ).returning(table.c.id)
        job_id = int((await self.s.exec(stmt)).one()[0])
        job = await self.s.get(IngestJob, job_id, populate_existing=True)
        assert job is not None
        return job

    async def due(self, now: datetime, limit: int = 20) -> list[IngestJob]:
        """Pending jobs whose time has come, oldest first."""
        res = await self.s.exec(
            select(IngestJob)
            .where(IngestJob.status == "pending", col(IngestJob.due_at) <= now)
            .order_by(col(IngestJob.due_at))
            .limit(limit)
        )
        return list(res.all())

    async def claim(self, job_id: int, now: datetime, hold_until: datetime) -> int | None:
        """Take a due job; its attempt number, or None when it is no longer due.

        A newer submission moves ``due_at`` on (so a replaced job is not taken) and resets the
        attempts; the claim pushes ``due_at`` to ``hold_until``, so a process that dies mid-way
        leaves the job to be taken again then.
        """
        table = IngestJob.__table__  # type: ignore[attr-defined]  # SQLModel's table
        res = await self.s.exec(
            update(table)
            .where(table.c.id == job_id, table.c.status == "pending", table.c.due_at <= now)
            .values(due_at=hold_until, attempts=table.c.attempts + 1)
            .returning(table.c.attempts)
        )
        row = res.first()
        return int(row[0]) if row is not None else None

    async def extend(self, job_id: int, attempt: int, hold_until: datetime) -> bool:
        """Keep a running job's claim (its ``due_at``) while this attempt still holds it."""
        table = IngestJob.__table__  # type: ignore[attr-defined]  # SQLModel's table
        res = await self.s.exec(
            update(table)
            .where(table.c.id == job_id, table.c.status == "pending", table.c.attempts == attempt)
            .values(due_at=hold_until)
        )
        return bool(res.rowcount)

    async def settle(self, job_id: int, attempt: int, **values: Any) -> bool:
        """Record a run's outcome, unless a newer submission replaced the job meanwhile."""
        table = IngestJob.__table__  # type: ignore[attr-defined]  # SQLModel's table
        res = await self.s.exec(
            update(table).where(table.c.id == job_id, table.c.attempts == attempt).values(**values)
        )
        return bool(res.rowcount)

    async def next_due(self) -> datetime | None:
        """When the earliest pending job is due (None: nothing waits)."""
        res = await self.s.exec(
            select(IngestJob.due_at)
            .where(IngestJob.status == "pending")
            .order_by(col(IngestJob.due_at))
            .limit(1)
        )
        return res.first()

    async def get(self, job_id: int) -> IngestJob | None:
        """One job."""
        return await self.s.get(IngestJob, job_id)

    async def for_user(self, user_id: int) -> list[IngestJob]:
        """A user's jobs, newest first."""
        res = await self.s.exec(
            select(IngestJob).where(IngestJob.user_id == user_id).order_by(col(IngestJob.id).desc())
        )
        return list(res.all())


class DocumentRepo:
    """Chunks of documents people sent."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, chunks: list[DocumentChunk]) -> list[DocumentChunk]:
        """Store chunks; returns them with their ids."""
        self.s.add_all(chunks)
        await self.s.flush()
        return chunks
