"""Processes of this deployment and their newest log lines (the owner's control page, #31)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import LifebotProcess, ProcessLog


@dataclass(frozen=True, slots=True)
class LineIn:
    """A log line to keep (already redacted)."""

    seq: int
    at: datetime
    level: str
    logger: str
    text: str


class ProcessRepo:
    """Heartbeat rows and the log ring each process keeps in the database."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def beat(self, process: LifebotProcess) -> None:
        """Write this process's row (its heartbeat); only the process itself writes it."""
        found = await self.s.get(LifebotProcess, process.id)
        if found is None:
            self.s.add(process)
            return
        for name in ("last_seen_at", "stopped_at", "channels", "web", "jobs_enabled"):
            setattr(found, name, getattr(process, name))
        self.s.add(found)

    async def all(self) -> list[LifebotProcess]:
        """Every process with a row, the most recently seen first."""
        res = await self.s.exec(
            select(LifebotProcess).order_by(col(LifebotProcess.last_seen_at).desc())
        )
        return list(res.all())

    async def add_lines(self, process_id: str, lines: Sequence[LineIn], keep: int) -> None:
        """Keep ``lines`` of ``process_id``, then only its newest ``keep`` lines."""
        if not lines:
            return
        self.s.add_all(
            ProcessLog(
                process_id=process_id,
                seq=line.seq,
                at=line.at,
                level=line.level,
                logger=line.logger,
                text=line.text,
            )
            for line in lines
        )
        await self.s.flush()
        newest = max(line.seq for line in lines)
        await self.s.exec(
            delete(ProcessLog).where(
                col(ProcessLog.process_id) == process_id, col(ProcessLog.seq) <= newest - keep
            )
        )

    async def lines(self, *, per_process: int, other_than: str | None = None) -> list[ProcessLog]:
        """The newest ``per_process`` lines of every process (but ``other_than``), oldest first."""
        ranked = (
            select(
                col(ProcessLog.id).label("id"),
                func.row_number()
                .over(partition_by=ProcessLog.process_id, order_by=col(ProcessLog.seq).desc())
                .label("n"),
            )
            .where(col(ProcessLog.process_id) != (other_than or ""))
            .subquery()
        )
        res = await self.s.exec(
            select(ProcessLog)
            .join(ranked, col(ProcessLog.id) == ranked.c.id)
            .where(ranked.c.n <= per_process)
            .order_by(col(ProcessLog.at), col(ProcessLog.seq))
        )
        return list(res.all())

    async def forget_before(self, when: datetime) -> int:
        """Drop processes last seen before ``when`` and their lines; how many processes."""
        gone = [
            p.id
            for p in (
                await self.s.exec(
                    select(LifebotProcess).where(col(LifebotProcess.last_seen_at) < when)
                )
            ).all()
        ]
        if gone:
            await self.s.exec(delete(ProcessLog).where(col(ProcessLog.process_id).in_(gone)))
            await self.s.exec(delete(LifebotProcess).where(col(LifebotProcess.id).in_(gone)))
        return len(gone)
