"""The job service: leader election, APScheduler with a persistent job store, the outbox worker.

Only the leader (see :mod:`bot.jobs.engine.leader`) runs APScheduler
(``bot.jobs.engine.offloop``) and the outbox worker; the others keep trying the lock every
``heartbeat`` seconds and take over when the leader dies. APScheduler only says *when* to
look; our own tables (outbox, reminders, proposals) say *what* must be sent, so a restart, a
takeover or a run that fires twice cannot send anything twice. Each job body takes ``now``
from the injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine
from sqlalchemy.exc import SQLAlchemyError

from bot.clock import Clock
from bot.errors import BotError
from bot.jobs.engine.leader import LeaderLock
from bot.jobs.engine.timer import DueTimer
from bot.jobs.outbox.delivery import Outbox
from storage.db import Database, limit_idle_transactions
from storage.repos.job_state import JobStateRepo

if TYPE_CHECKING:  # APScheduler is imported when a process starts leading (CLI start-up speed)
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    from bot.jobs.engine.offloop import OffLoopScheduler

log = logging.getLogger(__name__)

JobFn = Callable[[datetime], Awaitable[str]]


DueFn = Callable[[datetime], Awaitable[datetime | None]]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A periodic job: its id, how often, and its body (takes ``now``, returns a summary)."""

    id: str
    every: float
    fn: JobFn
    description: str
    next_due: DueFn | None = None
    """When the job next has work at an exact time (None: the poll is enough). The leader's
    due timer then runs it at that time; the poll every ``every`` seconds stays a backstop."""


class _Active:
    """The service leading in this process (APScheduler stores jobs by textual reference)."""

    service: JobService | None = None


def run_registered(job_id: str) -> str:
    """The function every stored APScheduler job points at (called in a scheduler thread).

    It hands the job to the leading service's event loop and waits for its result there.
    """
    service = _Active.service
    scheduler = service.scheduler if service is not None else None
    if service is None or scheduler is None:
        return "no job service is leading in this process"
    result = scheduler.run_on_loop(lambda: service.run_job(job_id))
    return str(result) if result is not None else "not run: the scheduler is stopping"


def sync_url(async_url: str) -> str | None:
    """A synchronous SQLAlchemy URL for APScheduler's job store (which is not async)."""
    if async_url.startswith("sqlite+aiosqlite://"):
        return "sqlite://" + async_url.removeprefix("sqlite+aiosqlite://")
    if async_url.startswith("postgresql+asyncpg://"):
        try:
            import psycopg  # noqa: F401, PLC0415  (only to see whether the driver is installed)
        except ImportError:
            return None
        return "postgresql+psycopg://" + async_url.removeprefix("postgresql+asyncpg://")
    return None


STORE_IDLE_LIMIT = 5.0
"""Seconds PostgreSQL lets a job-store connection sit inside a transaction before it closes
it. APScheduler's transactions are one statement each; a process frozen half-way through
one (SIGSTOP, a paused VM) would otherwise keep its row locked, and the next leader's start,
for as long as it stays frozen."""


def job_store_engine(url: str, idle_limit: float = STORE_IDLE_LIMIT) -> Any:
    """The synchronous engine APScheduler's job store uses (a frozen holder's locks lapse).

    They lapse after ``idle_limit`` seconds (``STORE_IDLE_LIMIT`` by default).
    """
    engine = create_engine(url, pool_pre_ping=True)
    if url.startswith("postgresql"):
        limit_idle_transactions(engine, idle_limit)
    return engine


class JobService:
    """Runs the scheduled jobs while this process holds the leader lock."""

    name = "jobs"

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        outbox: Outbox,
        lock: LeaderLock,
        jobs: list[JobSpec],
        heartbeat: float = 10.0,
        persistent: bool = True,
        stop_grace: float = 10.0,
        timer: DueTimer | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.outbox = outbox
        self.lock = lock
        self.jobs = {j.id: j for j in jobs}
        self.heartbeat = heartbeat
        self.persistent = persistent
        self.stop_grace = stop_grace
        self.timer = timer
        """Wakes the leader exactly when the next push is due (None: the jobs' polls only)."""
        self._timer_task: asyncio.Task[None] | None = None
        self.scheduler: OffLoopScheduler | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[Any]] = set()
        self._sync_engine: Any = None
        self._start_failing = False

    @property
    def is_leader(self) -> bool:
        """True while this process runs the jobs."""
        return self.scheduler is not None

    async def start(self) -> None:
        """Start competing for leadership in the background."""
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._lead_loop(), name="jobs-leader")

    async def _lead_loop(self) -> None:
        while True:
            try:
                await self.step()
            except Exception:  # a surprise in one heartbeat must not end them all
                log.exception("a scheduler heartbeat failed; trying again")
            await asyncio.sleep(self.heartbeat)

    async def step(self) -> bool:
        """One heartbeat: take or keep the lock; start or stop the jobs to match."""
        try:
            leader = await self.lock.acquire(self.clock.now())
        except (SQLAlchemyError, OSError, BotError) as exc:
            log.warning("could not check the scheduler lock: %s", exc)
            leader = False
        if leader and not self.is_leader:
            try:
                await self._lead()
            except Exception as exc:  # noqa: BLE001  (the heartbeat must outlive a bad start)
                await self._abandon(exc)
                return False
        elif not leader and self.is_leader:
            log.warning("lost the scheduler lock; another process runs the jobs now")
            await self._step_down()
        return leader

    async def _lead(self) -> None:
        from bot.jobs.engine.offloop import OffLoopScheduler  # noqa: PLC0415

        log.info("this process now runs the scheduled jobs (%s)", self.lock.holder)
        scheduler = OffLoopScheduler(
            asyncio.get_running_loop(),
            jobstore=self._jobstore(),
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            workers=len(self.jobs) + 1,
        )
        first = datetime.now(UTC) + timedelta(seconds=1)
        for spec in self.jobs.values():
            scheduler.scheduler.add_job(
                run_registered,
                "interval",
                seconds=spec.every,
                args=[spec.id],
                id=spec.id,
                name=spec.description,
                replace_existing=True,
                next_run_time=first,
            )
        _Active.service = self
        await asyncio.to_thread(scheduler.start)  # the job store is synchronous I/O
        self.scheduler = scheduler
        self.outbox.resume(self.lock.fence)
        self._worker = asyncio.create_task(self.outbox.run_forever(), name="outbox-worker")
        if self.timer is not None:
            self._timer_task = asyncio.create_task(self.timer.run_forever(), name="due-timer")
        if self._start_failing:
            log.info("the scheduled jobs started after all")
        self._start_failing = False

    async def _abandon(self, exc: Exception) -> None:
        """The jobs could not start (APScheduler's store failed): give the lease up.

        Another process may lead meanwhile; the next heartbeat tries again. Logged once per
        outage.
        """
        if not self._start_failing:
            log.error(
                "could not start the scheduled jobs (%s: %s); giving the lead up, trying again "
                "every %s s",
                type(exc).__name__,
                exc,
                self.heartbeat,
            )
        self._start_failing = True
        await self._step_down()
        try:
            await self.lock.release()
        except (SQLAlchemyError, OSError) as release_exc:
            log.warning("could not release the scheduler lock: %s", release_exc)

    def _jobstore(self) -> SQLAlchemyJobStore | MemoryJobStore:
        from apscheduler.jobstores.memory import MemoryJobStore  # noqa: PLC0415
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore  # noqa: PLC0415

        url = sync_url(self.db.url) if self.persistent else None
        if url is None:
            if self.persistent:
                log.warning("no synchronous driver for the job store; jobs are kept in memory")
            return MemoryJobStore()
        self._sync_engine = job_store_engine(url)
        return SQLAlchemyJobStore(engine=self._sync_engine)

    async def _step_down(self) -> None:
        """Stop the jobs cleanly: no new runs, let running ones finish (up to a grace), stop.

        Sends in flight are allowed to finish: a send cut off half-way would leave its row
        "sending" and, on a channel that cannot be asked, uncertain.
        """
        scheduler, self.scheduler = self.scheduler, None
        timer, self._timer_task = self._timer_task, None
        if timer is not None:
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        self.outbox.request_stop()
        running: set[asyncio.Task[Any]] = set(self._running)
        waiting: set[asyncio.Future[Any]] = set()
        if scheduler is not None:
            await asyncio.to_thread(scheduler.stop_taking_runs)  # its last round is done
            waiting = scheduler.live()  # runs it handed to the loop before that
        worker, self._worker = self._worker, None
        if worker is not None:
            running.add(worker)
        if running or waiting:
            _, pending = await asyncio.wait(running | waiting, timeout=self.stop_grace)
            for task in pending:
                task.cancel()
            if scheduler is not None:
                scheduler.cancel_live()  # the threads waiting for them return at once
            await asyncio.gather(*running, *waiting, return_exceptions=True)
        if _Active.service is self:
            _Active.service = None
        if self._sync_engine is not None:
            await asyncio.to_thread(self._sync_engine.dispose)
            self._sync_engine = None

    async def stop(self) -> None:
        """Stop leading (and competing), release the lock; waits for running jobs to end."""
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.is_leader:
            await self._step_down()
            try:
                await self.lock.release()
            except (SQLAlchemyError, OSError) as exc:
                log.warning("could not release the scheduler lock: %s", exc)

    async def run_soon(self, job_id: str) -> None:
        """Bring a job's next run forward to now (e.g. a new message to scan)."""
        from apscheduler.jobstores.base import JobLookupError  # noqa: PLC0415

        scheduler = self.scheduler
        if scheduler is None:
            return
        try:
            await asyncio.to_thread(
                scheduler.scheduler.modify_job, job_id, next_run_time=datetime.now(UTC)
            )
        except JobLookupError:
            log.debug("no job %s to run soon", job_id)

    async def run_job(self, job_id: str) -> str:
        """Run one job now with the clock's ``now``; record its result and its run.

        ``lifebot jobs`` shows the last result; the owner's page shows the history too
        (which process ran it, how long it took, whether it failed).
        """
        spec = self.jobs[job_id]
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        now = self.clock.now()
        began = time.monotonic()
        error: str | None = None
        try:
            result = await spec.fn(now)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one error path for jobs: log, record, keep running
            log.exception("job %s failed", job_id)
            result, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            if task is not None:
                self._running.discard(task)
        await self._record(job_id, now, result, error, time.monotonic() - began)
        return result

    async def _record(
        self, job_id: str, now: datetime, result: str, error: str | None, seconds: float
    ) -> None:
        try:
            async with self.db.session() as s:
                await JobStateRepo(s).record_run(
                    job_id, now, result, error, process_id=self.lock.holder, seconds=seconds
                )
        except SQLAlchemyError as exc:
            log.warning("could not record the result of job %s: %s", job_id, exc)
