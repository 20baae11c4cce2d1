"""Scheduled jobs' own bookkeeping: last results (``lifebot jobs``) and scan cursors."""

from __future__ import annotations

from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import JobState


class JobStateRepo:
    """One ``JobState`` row per job id."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def record_run(self, job_id: str, now: datetime, result: str, error: str | None) -> None:
        """Store the outcome of one run (texts cut to 500 characters)."""
        state = await self.s.get(JobState, job_id) or JobState(id=job_id)
        state.last_run_at = now
        state.last_result = result[:500]
        state.last_error = error[:500] if error else None
        state.runs += 1
        self.s.add(state)

    async def cursor(self, job_id: str) -> int | None:
        """A scanning job's cursor (the last message id it looked at); None before its first run."""
        state = await self.s.get(JobState, job_id)
        return None if state is None else state.cursor

    async def advance(self, job_id: str, cursor: int) -> None:
        """Move the cursor forward (never back); creates the row on the first run."""
        state = await self.s.get(JobState, job_id) or JobState(id=job_id, cursor=cursor)
        state.cursor = max(state.cursor, cursor)
        self.s.add(state)
