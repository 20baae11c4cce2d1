"""What the owner's control page shows beyond pairings and users (issue 31).

Every process of the deployment and which one leads, the scheduled jobs with their next
and recent runs and failures, the outbox, a live log tail, and the effective configuration.
The page may be served by any process: processes, job runs and other processes' log lines
come from the database (``bot.jobs.engine.presence`` keeps them there), this process's own log
lines straight from memory (``bot.logring``), so a line shows the moment it is written.

Every free text shown (log lines, job results, push errors) passes the redaction of every
declared secret once more here, whatever the process that wrote it did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.clock import Clock
from bot.jobs.engine.presence import silent_after
from bot.jobs.service import Jobs
from bot.logring import LogRing
from storage.db import Database
from storage.models import Delivery, JobLease, JobRun, LifebotProcess
from storage.repos.job_state import JobStateRepo
from storage.repos.processes import ProcessRepo
from storage.repos.web import WebViewRepo, head_revision

TAIL_LINES = 200
"""Log lines the page shows (the newest, of every process together)."""
RUNS_SHOWN = 30
"""Recent job runs the page lists."""
LEASE = "scheduler"
"""The leader lease's name (``bot.jobs.engine.leader``)."""


@dataclass(frozen=True, slots=True)
class SettingRow:
    """One setting as the page shows it."""

    name: str
    """Its name in ``bot.config.Settings``."""
    env: str
    """The environment variable that sets it."""
    value: str
    """Its effective value as text; a declared secret only says whether it is set."""
    secret: bool
    """A declared secret (``Feature.secrets``): its value is never shown."""
    changed: bool
    """Set by the environment or ``.env`` (False: the default)."""


@dataclass(frozen=True, slots=True)
class TailLine:
    """A log line of some process, as the page shows it."""

    at: datetime
    process: str
    """``host:pid`` of the process that wrote it."""
    here: bool
    """Written by the process serving this page."""
    level: str
    logger: str
    text: str

    def as_json(self) -> dict[str, Any]:
        """The line for the page's script."""
        return {
            "at": self.at.astimezone(UTC).isoformat(timespec="milliseconds"),
            "process": self.process,
            "here": self.here,
            "level": self.level,
            "logger": self.logger,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class ProcessView:
    """A process of the deployment."""

    row: LifebotProcess
    here: bool
    """The process serving this page."""
    state: str
    """``running``, ``stopped`` (cleanly) or ``silent`` (no heartbeat lately: dead or frozen)."""
    leader: bool
    """It holds the scheduler's lease: it runs the jobs and sends the pushes."""

    @property
    def label(self) -> str:
        """``host:pid``."""
        return f"{self.row.host}:{self.row.pid}"


@dataclass(frozen=True, slots=True)
class JobView:
    """A scheduled job: when it runs and how it went."""

    id: str
    description: str
    every: float
    """Seconds between runs."""
    next_run: datetime | None
    last_run: datetime | None
    last_result: str
    last_error: str | None
    runs: int
    failures: int
    """Failed runs among its kept history (the last 50)."""


@dataclass(frozen=True, slots=True)
class RunView:
    """One recent run of a job."""

    run: JobRun
    process: str
    """``host:pid`` of the leader that ran it."""
    result: str
    error: str | None


@dataclass(frozen=True, slots=True)
class OutboxView:
    """Pushes by status and the newest ones."""

    counts: dict[str, int]
    newest: list[Delivery]
    errors: dict[int, str]
    """Each shown push's last error, redacted, by id."""


def label_of(process_id: str) -> str:
    """``host:pid`` from a process id (``host:pid:random``)."""
    host, _, rest = process_id.partition(":")
    return f"{host}:{rest.split(':', 1)[0]}" if rest else process_id


@dataclass(frozen=True, slots=True)
class Readiness:
    """The database's side of ``/readyz``."""

    revision: str | None
    """The migration the database is at."""
    head: str | None
    """The newest migration this version ships."""
    leases: list[JobLease]
    """Live scheduler leases (whoever runs the jobs)."""


@dataclass(frozen=True, slots=True)
class Gauges:
    """The database's gauges of ``/metrics``."""

    unanswered: list[tuple[str, str, int]]
    """(channel, status, count) of messages still without an answer."""
    outbox_depth: dict[str, int]
    """Pushes by state."""
    audio_waiting: int
    """Pendant utterances still to transcribe."""


class ControlPanel:
    """Reads what the control page shows."""

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        jobs: Jobs,
        ring: LogRing,
        process_id: str,
        heartbeat: float,
        settings: list[SettingRow],
        redact: Callable[[str], str],
    ) -> None:
        self.db = db
        self.clock = clock
        self.jobs = jobs
        self.ring = ring
        self.process_id = process_id
        """This process (``host:pid:random``)."""
        self.heartbeat = heartbeat
        """Seconds between processes' heartbeats (three missed and a process is silent)."""
        self.settings = settings
        """The effective configuration, secrets already masked (``bot.app.settings_view``)."""
        self.redact = redact
        """Cleans a text of every declared secret."""

    async def tail(self, limit: int = TAIL_LINES) -> list[TailLine]:
        """The newest ``limit`` log lines of every process, oldest first."""
        mine = [
            TailLine(n.at, label_of(self.process_id), True, n.level, n.logger, self.redact(n.text))
            for n in self.ring.newest(limit)
        ]
        async with self.db.session() as s:
            rows = await ProcessRepo(s).lines(per_process=limit, other_than=self.process_id)
        others = [
            TailLine(r.at, label_of(r.process_id), False, r.level, r.logger, self.redact(r.text))
            for r in rows
        ]
        return sorted(mine + others, key=lambda line: line.at)[-limit:]

    async def readiness(self) -> Readiness:
        """The database's migration state and the live leases (``/readyz``).

        Raises ``StorageError`` when the database cannot be reached.
        """
        await self.db.ping()
        async with self.db.session() as s:
            repo = WebViewRepo(s)
            current = await repo.schema_revision()
            leases = await repo.live_leases(self.clock.now())
        head = await asyncio.to_thread(head_revision)  # reads the migration scripts
        return Readiness(current, head, leases)

    async def gauges(self) -> Gauges:
        """What ``/metrics`` reads from the database, for every process alike."""
        async with self.db.session() as s:
            repo = WebViewRepo(s)
            return Gauges(
                await repo.unanswered(), await repo.outbox_depth(), await repo.audio_waiting_all()
            )

    async def processes(self) -> list[ProcessView]:
        """Every process seen in the last week, this one first, then the most recently seen."""
        now = self.clock.now()
        async with self.db.session() as s:
            rows = await ProcessRepo(s).all()
            lease = await _live_lease(WebViewRepo(s), now)
        silent = timedelta(seconds=silent_after(self.heartbeat))
        views = []
        for row in rows:
            if row.stopped_at is not None:
                state = "stopped"
            elif now - row.last_seen_at > silent:
                state = "silent"
            else:
                state = "running"
            leader = lease is not None and lease.holder == row.id
            views.append(ProcessView(row, row.id == self.process_id, state, leader))
        return sorted(views, key=lambda v: not v.here)

    async def leader(self) -> JobLease | None:
        """The live scheduler lease (None: no process runs the jobs now)."""
        async with self.db.session() as s:
            return await _live_lease(WebViewRepo(s), self.clock.now())

    async def job_views(self) -> list[JobView]:
        """Every scheduled job with its next run, last run and failures."""
        async with self.db.session() as s:
            repo = JobStateRepo(s)
            states = await repo.all()
            failures = await repo.failures()
            next_runs = {k: _aware(v) for k, v in (await repo.next_runs()).items()}
        if not next_runs:  # no job store table: the leader's in-memory store, if it is us
            next_runs = await self._next_runs_here()
        views = []
        for job_id, spec in sorted(self.jobs.service.jobs.items()):
            st = states.get(job_id)
            views.append(
                JobView(
                    id=job_id,
                    description=spec.description,
                    every=spec.every,
                    next_run=next_runs.get(job_id),
                    last_run=st.last_run_at if st else None,
                    last_result=self.redact(st.last_result) if st else "",
                    last_error=self.redact(st.last_error) if st and st.last_error else None,
                    runs=st.runs if st else 0,
                    failures=failures.get(job_id, 0),
                )
            )
        return views

    async def _next_runs_here(self) -> dict[str, datetime | None]:
        scheduler = self.jobs.service.scheduler
        if scheduler is None:
            return {}

        def read() -> dict[str, datetime | None]:
            return {j.id: _aware(j.next_run_time) for j in scheduler.scheduler.get_jobs()}

        return await asyncio.to_thread(read)  # the scheduler's store is read under its lock

    async def recent_runs(self, limit: int = RUNS_SHOWN) -> list[RunView]:
        """The newest runs of every job, newest first."""
        async with self.db.session() as s:
            runs = await JobStateRepo(s).recent_runs(limit)
        return [
            RunView(
                r,
                label_of(r.process_id),
                self.redact(r.result),
                self.redact(r.error) if r.error else None,
            )
            for r in runs
        ]

    async def outbox(self, limit: int = 50) -> OutboxView:
        """Pushes by status (every kind) and the newest ``limit``."""
        async with self.db.session() as s:
            counts = await WebViewRepo(s).outbox_depth()
            newest = await WebViewRepo(s).all_deliveries(limit)
        errors = {d.id or 0: self.redact(d.last_error) for d in newest if d.last_error}
        return OutboxView(counts, newest, errors)


async def _live_lease(repo: WebViewRepo, now: datetime) -> JobLease | None:
    for lease in await repo.live_leases(now):
        if lease.name == LEASE:
            return lease
    return None


def _aware(value: object) -> datetime | None:
    """APScheduler's next run time (a datetime, or epoch seconds in its table) in UTC."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    return None
