"""The scheduler: one leader runs the jobs, another takes over when it dies; jobs persist."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import text, update
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession
from typer.testing import CliRunner

from bot.app.cli import app as cli
from bot.jobs.engine.leader import LeaseLock
from bot.jobs.engine.scheduler import STORE_IDLE_LIMIT, job_store_engine, sync_url
from bot.messages import OutboundMessage, Receipt
from storage.db import Database
from storage.models import JobState, Reminder
from storage.repos._conn import FROZEN_HOLDER_LIMIT, bound_idle
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.reminders import ReminderRepo
from storage.repos.users import UserRepo
from storage.repos.web import WebViewRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.app import AppFactory
from tests.support.builders import make_inbound
from tests.support.jobs import deliveries, jobs_app, jobs_of, make_user
from tests.support.telegram import eventually

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


class NotifyingChannel(RecordingChannel):
    """Sets ``pushed`` when a scheduled push (not a reply) arrives."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.pushed = asyncio.Event()

    async def send(self, msg: OutboundMessage) -> Receipt:
        receipt = await super().send(msg)
        if msg.kind != "reply":
            self.pushed.set()
        return receipt


async def test_a_lease_has_one_holder_and_passes_on_when_the_holder_stops_renewing(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock) as app:
        a = LeaseLock(app.db, "a", ttl=timedelta(seconds=30))
        b = LeaseLock(app.db, "b", ttl=timedelta(seconds=30))
        assert await a.acquire(clock.now())
        assert not await b.acquire(clock.advance(seconds=10))
        assert await a.acquire(clock.advance(seconds=10))  # a heartbeat renews
        assert not await b.acquire(clock.advance(seconds=29))
        # "a" dies: no more heartbeats. Its lease runs out and "b" takes over.
        assert await b.acquire(clock.advance(seconds=2))
        assert not await a.acquire(clock.advance(seconds=1))  # a late "a" learns it lost
        await b.release()
        assert await a.acquire(clock.now())  # a clean stop hands over at once


async def test_only_the_leader_runs_jobs_and_a_standby_takes_over(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    fake = RecordingChannel("fake")
    async with jobs_app(tmp_path, clock) as one, jobs_app(tmp_path, clock) as two:
        for application in (one, two):
            application.dispatcher.register(fake)
        first, second = jobs_of(one).service, jobs_of(two).service
        try:
            assert await first.step()
            assert not await second.step()
            assert first.is_leader and not second.is_leader
            # The leader stops heartbeating (a hung or dead process); its lease expires.
            clock.advance(seconds=31)
            assert await second.step()
            assert not await first.step()  # the old leader notices and stops its scheduler
            assert second.is_leader and not first.is_leader
        finally:
            await first.stop()
            await second.stop()


async def test_the_leader_runs_due_work_and_keeps_its_jobs_in_the_database(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock) as app:
        fake = NotifyingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana")
        await app.dispatcher.handle(make_inbound("/remind in 5 minutes to stretch", sender="ana"))
        clock.advance(minutes=5)
        service = jobs_of(app).service
        assert await service.step()  # leader: APScheduler runs the jobs (first run in ~1 s)
        await asyncio.wait_for(fake.pushed.wait(), timeout=15)
        async with app.db.session() as s:
            stored = (await s.exec(text("SELECT id FROM apscheduler_jobs ORDER BY id"))).all()  # type: ignore[call-overload]
        await service.stop()
        assert not service.is_leader
        [row] = await deliveries(app, "reminder")
    assert [m.text for m in fake.sent if m.kind == "reminder"] == ["⏰ Reminder: stretch"]
    assert row.status == "delivered"
    assert sorted(r[0] for r in stored) == [
        "ask.timeouts",
        "briefings.plan",
        "calendars.refresh",
        "journal.review",
        "location.proposals",
        "memory.extract",
        "outbox.reconcile",
        "proposals.expire",
        "proposals.scan",
        "reminders.fire",
    ]


async def test_a_leader_whose_job_store_fails_to_start_gives_the_lead_up_and_tries_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """APScheduler's start raising (its table unusable) ended the heartbeat task for good: the
    process kept the lease without running a job, then stopped competing, silently."""
    clock = ManualClock(datetime.now(UTC))
    async with jobs_app(tmp_path, clock) as app:
        service = jobs_of(app).service
        async with app.db.session() as s:  # a table of that name APScheduler cannot use
            await s.exec(text("DROP TABLE apscheduler_jobs"))  # type: ignore[call-overload]
            await s.exec(text("CREATE TABLE apscheduler_jobs (other INTEGER)"))  # type: ignore[call-overload]
        try:
            await service.start()  # the heartbeat loop, as serve runs it

            async def given_up() -> bool:
                # Said once, then the lease is released: another process may lead meanwhile.
                # (Checked together: the log line comes just before the release.)
                async with app.db.session() as s:
                    leases = await WebViewRepo(s).live_leases(datetime.now(UTC))
                said = "could not start the scheduled jobs" in caplog.text
                return said and not service.is_leader and leases == []

            async def leading() -> bool:
                return service.is_leader

            await eventually(given_up, within=10)
            async with app.db.session() as s:
                # APScheduler makes its table again when it starts.
                await s.exec(text("DROP TABLE apscheduler_jobs"))  # type: ignore[call-overload]
            await eventually(leading, within=10)  # the next heartbeats try again, and lead
        finally:
            await service.stop()


def test_lifebot_jobs_lists_jobs_next_runs_and_last_results(tmp_path: Path) -> None:
    async def prepare() -> None:
        clock = ManualClock(datetime.now(UTC))
        async with jobs_app(tmp_path, clock) as app:
            service = jobs_of(app).service
            await service.step()
            await service.run_job("briefings.plan")
            await service.stop()

    asyncio.run(prepare())
    result = CliRunner().invoke(cli, ["jobs"], env={"LIFEBOT_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("leader: none")
    plan = next(line for line in lines if line.startswith("briefings.plan"))
    assert "60s" in plan and "nothing due" in plan
    assert plan.count(str(datetime.now(UTC).year)) == 2  # next run and last run


async def test_on_postgres_the_leader_keeps_its_jobs_in_postgres(
    tmp_path: Path, migrated_postgres_url: str
) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock, database_url_setting=migrated_postgres_url) as app:
        fake = NotifyingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana")
        await app.dispatcher.handle(make_inbound("/remind in 5 minutes to stretch", sender="ana"))
        clock.advance(minutes=5)
        service = jobs_of(app).service
        assert await service.step()
        await asyncio.wait_for(fake.pushed.wait(), timeout=15)
        async with app.db.session() as s:
            stored = (await s.exec(text("SELECT count(*) FROM apscheduler_jobs"))).one()  # type: ignore[call-overload]
        await service.stop()
    # the jobs room's five, journal, calendars, memory, location's scan, questions' timeouts
    assert stored[0] == 10
    assert [m.text for m in fake.sent if m.kind == "reminder"] == ["⏰ Reminder: stretch"]


async def test_on_postgres_a_leader_frozen_mid_write_to_the_job_store_does_not_hold_the_next(
    tmp_path: Path, migrated_postgres_url: str
) -> None:
    """A leader stopped (SIGSTOP) between APScheduler's UPDATE of a job's next run and its
    COMMIT kept that row locked: the next leader's start waited on it, its heartbeat with it,
    and no reminder left any process until the frozen one woke (a scale test failed so)."""
    clock = ManualClock(datetime.now(UTC))
    url = migrated_postgres_url
    async with jobs_app(tmp_path, clock, database_url_setting=url) as one:
        first = jobs_of(one).service
        assert await first.step()
        await first.stop()  # the job store now holds the jobs' rows
        store_url = sync_url(url)
        assert store_url is not None
        # A connection made as the leader's are, with a shorter limit so the test waits less;
        # the leader's own engines carry the production limit, checked at the end.
        frozen = job_store_engine(store_url, idle_limit=FAST_LIMIT)
        conn = await asyncio.to_thread(frozen.connect)
        try:

            def update_without_commit() -> None:
                conn.execute(text("UPDATE apscheduler_jobs SET next_run_time = next_run_time"))

            await asyncio.to_thread(update_without_commit)  # ... and then nothing: frozen
            async with jobs_app(tmp_path, clock, database_url_setting=url) as two:
                second = jobs_of(two).service
                began = time.monotonic()
                try:
                    led = await asyncio.wait_for(second.step(), timeout=FAST_LIMIT + 10)
                finally:
                    await second.stop()
                took = time.monotonic() - began
        finally:
            with contextlib.suppress(Exception):  # the server has closed it by now
                await asyncio.to_thread(conn.close)
            await asyncio.to_thread(frozen.dispose)
        production = await asyncio.to_thread(_idle_limit_of, job_store_engine(store_url))
    assert led
    assert took < FAST_LIMIT + 5
    assert production == f"{int(STORE_IDLE_LIMIT)}s"


FAST_LIMIT = 1.0
"""The frozen-holder limit these tests give their frozen process (production's is 5 s): a
lock released after it, not after the freeze, proves the same, sooner."""


def _idle_limit_of(engine: Any) -> str:
    """The idle-in-transaction limit a new connection of ``engine`` has (as PostgreSQL shows it)."""
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar())
    finally:
        engine.dispose()


async def _holder_limit_of(db: Database) -> str:
    """The limit a bounded transaction of ``db`` (the lease's, the outbox's) runs under."""
    async with db.session() as s:
        await bound_idle(s)
        shown = await s.exec(text("SHOW idle_in_transaction_session_timeout"))  # type: ignore[call-overload]
        return str(shown.scalar())


T = TypeVar("T")


class _FrozenBeforeCommit(Database):
    """A database whose units of work stop after their last statement, before the commit:
    a process frozen (SIGSTOP, a paused VM) half-way through one, its transaction open."""

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as s:
            yield s
            await s.flush()
            await asyncio.Event().wait()  # never commits


async def _past_a_frozen_holder(
    hold: Coroutine[Any, Any, object], take: Callable[[], Awaitable[T]], *, within: float
) -> tuple[T | None, float]:
    """Run ``hold`` (a unit of work that freezes before its commit), then time ``take``, which
    needs the same rows: (its result, or None when it was still waiting after ``within`` s;
    the seconds it took)."""
    frozen = asyncio.create_task(hold)
    await asyncio.sleep(0.5)  # written, not committed: the rows are locked
    began = time.monotonic()
    got = None
    with contextlib.suppress(TimeoutError):
        got = await asyncio.wait_for(take(), within)
    took = time.monotonic() - began
    frozen.cancel()
    with contextlib.suppress(BaseException):
        await frozen
    return got, took


async def test_on_postgres_a_leader_frozen_mid_heartbeat_does_not_keep_the_lease(
    migrated_postgres_url: str,
) -> None:
    """A leader stopped between its heartbeat's UPDATE of the lease row and its COMMIT kept
    that row locked: every other process's attempt to take the lease waited on it, so none
    ever led while the frozen one slept (the job store had the same flaw; its fix is above)."""
    url = migrated_postgres_url
    ttl = timedelta(seconds=2)
    db, frozen_db = Database(url), _FrozenBeforeCommit(url, holder_limit=FAST_LIMIT)
    leader = LeaseLock(db, "host-a:1:aaaaaa", ttl=ttl)
    other = LeaseLock(db, "host-b:2:bbbbbb", ttl=ttl)

    async def take_over() -> bool:
        for _ in range(200):  # each try waits on the locked row, so no pause is needed
            if await other.acquire(datetime.now(UTC) + ttl * 2):
                return True
        return False

    try:
        assert await leader.acquire(datetime.now(UTC))
        leader.db = frozen_db
        heartbeat = leader.acquire(datetime.now(UTC))
        led, took = await _past_a_frozen_holder(heartbeat, take_over, within=FAST_LIMIT + 10)
        production = await _holder_limit_of(db)
    finally:
        await frozen_db.dispose()
        await db.dispose()
    assert led, "the lease stayed with the frozen leader"
    assert took < FAST_LIMIT + 5
    assert production == f"{int(FROZEN_HOLDER_LIMIT)}s"


async def test_on_postgres_a_leader_frozen_mid_claim_does_not_hold_the_push_from_the_next(
    migrated_postgres_url: str,
) -> None:
    """A leader stopped between claiming a push (its outbox row: pending -> sending) and the
    COMMIT kept the row locked: the next leader's claim of the same push waited on it for as
    long as the frozen one slept, and its delivery loop with it."""
    url = migrated_postgres_url
    db, frozen_db = Database(url), _FrozenBeforeCommit(url, holder_limit=FAST_LIMIT)
    now = datetime.now(UTC)
    try:
        async with db.session() as s:
            user = await UserRepo(s).create("ana")
            repo = OutboxRepo(s)
            await repo.enqueue([Push(user.id or 0, "reminder", "r-1", now, "pills")], now)
        async with db.session() as s:
            [row] = await OutboxRepo(s).due(now, limit=10)

        async def claim(database: Database) -> bool:
            async with database.session() as s:
                return await OutboxRepo(s).claim(
                    row.id or 0, now, channel="fake", account="", chat_id="ana", message_id=None
                )

        claimed, took = await _past_a_frozen_holder(
            claim(frozen_db), lambda: claim(db), within=FAST_LIMIT + 10
        )
    finally:
        await frozen_db.dispose()
        await db.dispose()
    assert claimed is True, "the push stayed locked by the frozen leader"
    assert took < FAST_LIMIT + 5


async def test_on_postgres_any_unit_of_work_frozen_before_its_commit_gives_its_rows_up(
    migrated_postgres_url: str,
) -> None:
    """Beyond the lease and the outbox (5 s): every other transaction of a frozen process (a
    reminder's next time, a job's row) is ended by PostgreSQL after the database's limit, so
    whoever needs those rows next waits that long at most, not as long as the freeze."""
    url = migrated_postgres_url
    limit = FAST_LIMIT
    db, frozen_db = Database(url), _FrozenBeforeCommit(url, frozen_limit=limit)
    now = datetime.now(UTC)
    try:
        async with db.session() as s:
            user = await UserRepo(s).create("ana")
            reminder = await ReminderRepo(s).add(
                Reminder(user_id=user.id or 0, text="stretch", next_at=now)
            )
        rid = reminder.id or 0

        async def move(database: Database, minutes: int) -> bool:
            async with database.session() as s:
                await s.exec(
                    update(Reminder)
                    .where(col(Reminder.id) == rid)
                    .values(next_at=now + timedelta(minutes=minutes))
                )
            return True

        moved, took = await _past_a_frozen_holder(
            move(frozen_db, 5), lambda: move(db, 10), within=limit + 10
        )
        async with db.session() as s:
            stored = await s.get(Reminder, rid)
    finally:
        await frozen_db.dispose()
        await db.dispose()
    assert moved and took < limit + 5, took
    assert stored is not None and stored.next_at == now + timedelta(minutes=10)


class TimedChannel(RecordingChannel):
    """Records when each scheduled push arrived."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.arrived: list[datetime] = []
        self.pushed = asyncio.Event()

    async def send(self, msg: OutboundMessage) -> Receipt:
        receipt = await super().send(msg)
        if msg.kind == "reminder":
            self.arrived.append(datetime.now(UTC))
            self.pushed.set()
        return receipt


async def test_a_reminder_arrives_on_time_not_at_the_next_poll(app_factory: AppFactory) -> None:
    app = await app_factory(jobs_send_rate=0)
    fake = TimedChannel("fake")
    app.dispatcher.register(fake)
    user = await make_user(app, "ana")
    service = jobs_of(app).service
    try:
        assert await service.step()  # leading: the jobs' first runs happen at once
        # Past the reminders' first poll (its run recorded): only the exact timer can be on time
        # now, the next poll being 10 s away.
        await eventually(lambda: _has_run(app.db, "reminders.fire"), within=15)
        due = datetime.now(UTC) + timedelta(seconds=2)  # the timer looks every 1 s
        async with app.db.session() as s:
            await ReminderRepo(s).add(Reminder(user_id=user.id or 0, text="stretch", next_at=due))
        await asyncio.wait_for(fake.pushed.wait(), timeout=15)
    finally:
        await service.stop()
    late = (fake.arrived[0] - due).total_seconds()
    assert 0 <= late < 1.0, late  # the 10 s poll made it up to 10 s late


async def _has_run(db: Database, job_id: str) -> bool:
    """Whether the job's run is recorded (it ran once at least, and finished)."""
    async with db.session() as s:
        return await s.get(JobState, job_id) is not None


def test_lifebot_jobs_names_the_leader_by_host_and_pid_and_says_why_a_push_waits(
    tmp_path: Path,
) -> None:
    async def prepare() -> None:
        clock = ManualClock(datetime.now(UTC))
        async with jobs_app(tmp_path, clock) as app:
            user = await make_user(app, "ana")
            async with app.db.session() as s:
                await OutboxRepo(s).enqueue(
                    [
                        Push(
                            user.id or 0,
                            "reminder",
                            "r-1",
                            clock.now(),
                            "pills",
                            note="waiting: device ana is not connected here; until 12:02:00 UTC",
                        )
                    ],
                    clock.now(),
                )
        # A leader elsewhere, still holding its lease.
        async with jobs_app(tmp_path, clock) as app:
            assert await LeaseLock(app.db, "pendant-host:4242:abcdef").acquire(datetime.now(UTC))

    asyncio.run(prepare())
    result = CliRunner().invoke(cli, ["jobs"], env={"LIFEBOT_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("leader: host pendant-host, pid 4242")
    assert "pending: waiting: device ana is not connected here" in result.output
