"""Scheduled jobs' own bookkeeping: last results (``lifebot jobs``) and scan cursors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, text
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import JobLease, JobRun, JobState
from storage.repos._conn import connection_of

RUNS_KEPT = 50
"""Runs of each job kept in its history (the owner's page); older ones are dropped."""


class JobStateRepo:
    """One ``JobState`` row per job id."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def record_run(
        self,
        job_id: str,
        now: datetime,
        result: str,
        error: str | None,
        *,
        process_id: str = "",
        seconds: float = 0.0,
    ) -> None:
        """Store the outcome of one run (texts cut to 500 characters) and add it to the history.

        The history keeps each job's newest ``RUNS_KEPT`` runs.
        """
        state = await self.s.get(JobState, job_id) or JobState(id=job_id)
        state.last_run_at = now
        state.last_result = result[:500]
        state.last_error = error[:500] if error else None
        state.runs += 1
        self.s.add(state)
        self.s.add(
            JobRun(
                job_id=job_id,
                process_id=process_id,
                started_at=now,
                seconds=seconds,
                result=result[:500],
                error=state.last_error,
            )
        )
        await self.s.flush()
        kept = (
            select(JobRun.id)
            .where(col(JobRun.job_id) == job_id)
            .order_by(col(JobRun.id).desc())
            .limit(RUNS_KEPT)
        )
        await self.s.exec(
            delete(JobRun).where(
                col(JobRun.job_id) == job_id, col(JobRun.id).not_in(kept.scalar_subquery())
            )
        )

    async def recent_runs(self, limit: int) -> list[JobRun]:
        """The newest runs of every job, newest first."""
        res = await self.s.exec(select(JobRun).order_by(col(JobRun.id).desc()).limit(limit))
        return list(res.all())

    async def failures(self) -> dict[str, int]:
        """Failed runs among each job's kept history, by job id (jobs with none left out)."""
        res = await self.s.exec(
            select(JobRun.job_id, func.count())
            .where(col(JobRun.error).is_not(None))
            .group_by(col(JobRun.job_id))
        )
        return {str(job_id): int(n) for job_id, n in res.all()}

    async def cursor(self, job_id: str) -> int | None:
        """A scanning job's cursor (the last message id it looked at); None before its first run."""
        state = await self.s.get(JobState, job_id)
        return None if state is None else state.cursor

    async def advance(self, job_id: str, cursor: int) -> None:
        """Move the cursor forward (never back); creates the row on the first run."""
        state = await self.s.get(JobState, job_id) or JobState(id=job_id, cursor=cursor)
        state.cursor = max(state.cursor, cursor)
        self.s.add(state)

    async def all(self) -> dict[str, JobState]:
        """Every job's state by job id."""
        return {st.id: st for st in (await self.s.exec(select(JobState))).all()}

    async def next_runs(self) -> dict[str, Any]:
        """APScheduler's next run time per job id, from its own table ({} before it exists)."""
        conn = await connection_of(self.s)
        try:
            res = await conn.execute(text("SELECT id, next_run_time FROM apscheduler_jobs"))
        except SQLAlchemyError:
            return {}
        return {str(r[0]): r[1] for r in res.all()}

    async def lease(self, name: str) -> JobLease | None:
        """The scheduler lease row (SQLite leadership)."""
        return await self.s.get(JobLease, name)

    async def advisory_holder(self, key: int) -> int | None:
        """The PostgreSQL backend pid holding advisory lock ``key``, if any (PostgreSQL only)."""
        conn = await connection_of(self.s)
        res = await conn.execute(
            text(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = 0 AND objid = :k"
            ),
            {"k": key},
        )
        pid = res.scalar()
        return int(pid) if pid is not None else None
