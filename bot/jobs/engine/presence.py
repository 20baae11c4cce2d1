"""Every process says it is alive, and what it logs, where any process can read it (issue 31).

With several ``lifebot serve`` processes on one database, the owner's page is served by
whichever one the balancer picked; it shows them all from here. Each process renews its own
row (``lifebotprocess``) every heartbeat and copies its newest log lines (already redacted,
``bot.logring``) into a small ring of its own in the database (``processlog``): a line
reaches other processes' pages within a heartbeat, and the page's own process shows its
lines at once from memory. A clean stop writes ``stopped_at``; a process that died simply
stops being seen. Rows not seen for a week are dropped with their lines.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot.clock import Clock
from bot.logring import LogRing
from storage.db import Database
from storage.models import LifebotProcess
from storage.repos.processes import LineIn, ProcessRepo

log = logging.getLogger(__name__)

LINES_KEPT = 300
"""Log lines each process keeps in the database (its newest)."""
FORGET_AFTER = timedelta(days=7)
"""Processes not seen for this long are dropped from the list, with their lines."""
SILENT_AFTER = 10.0
"""Seconds without a heartbeat (at least; three heartbeats if longer) before a process is
taken for silent: dead, frozen or cut off from the database."""


def silent_after(every: float) -> float:
    """Seconds without a heartbeat, beating every ``every`` seconds, before a process is silent."""
    return max(3 * every, SILENT_AFTER)


@dataclass(frozen=True, slots=True)
class Presence:
    """What a process is doing right now (read at each heartbeat)."""

    channels: list[str] = field(default_factory=list)
    web: str = ""
    """Where its web page listens (``host:port``), or empty."""


class ProcessBeat:
    """This process's heartbeat row and its log lines in the database."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        ring: LogRing,
        *,
        process_id: str,
        every: float,
        jobs_enabled: bool,
        describe: Callable[[], Presence],
    ) -> None:
        self.db = db
        self.clock = clock
        self.ring = ring
        self.process_id = process_id
        """``host:pid:random``, the name it holds the leader lease under."""
        self.every = every
        """Seconds between heartbeats."""
        self.silent_after = silent_after(every)
        """Seconds without a heartbeat before a process is taken for gone (``silent_after``)."""
        self.jobs_enabled = jobs_enabled
        self.describe = describe
        self.command = "serve"
        """What the process was started as (``serve``, ``chat``), given to ``start``."""
        self._started_at: datetime | None = None
        self._flushed = 0
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    @property
    def running(self) -> bool:
        """True between ``start`` and ``stop``."""
        return self._task is not None

    async def start(self, command: str = "serve") -> None:
        """Say this process is here now, then every ``every`` seconds until ``stop``.

        ``command`` is what the process was started as (``serve``, ``chat``).
        """
        if self._task is not None:
            return
        self.command = command
        self._started_at = self.clock.now()
        await self.beat()  # with the lines logged while starting up
        self._task = asyncio.create_task(self._loop(), name="process-heartbeat")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.beat()

    async def beat(self, *, stopping: bool = False) -> None:
        """One heartbeat: renew the row, copy new log lines; a failure is logged once."""
        now = self.clock.now()
        presence = self.describe()
        lines = self.ring.after(self._flushed)[-LINES_KEPT:]
        try:
            async with self.db.session() as s:
                repo = ProcessRepo(s)
                await repo.beat(
                    LifebotProcess(
                        id=self.process_id,
                        host=socket.gethostname(),
                        pid=os.getpid(),
                        command=self.command,
                        started_at=self._started_at or now,
                        last_seen_at=now,
                        stopped_at=now if stopping else None,
                        channels=",".join(presence.channels),
                        web=presence.web,
                        jobs_enabled=self.jobs_enabled,
                    )
                )
                await repo.add_lines(
                    self.process_id,
                    [LineIn(n.seq, n.at, n.level, n.logger, n.text) for n in lines],
                    keep=LINES_KEPT,
                )
                await repo.forget_before(now - FORGET_AFTER)
        except (SQLAlchemyError, OSError) as exc:
            if not self._failing:  # once per outage: this very line would be copied next
                log.warning("could not write this process's heartbeat: %s", exc)
            self._failing = True
            return
        self._failing = False
        if lines:
            self._flushed = lines[-1].seq

    async def stop(self) -> None:
        """Stop the heartbeat and say this process stopped (with its last lines)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await self.beat(stopping=True)
