"""Builds the jobs feature from its collaborators (called by the composition root)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from bot.adapters.base import ChannelAdapter
from bot.agent.journal.service import JournalService
from bot.agent.llm import LLM
from bot.agent.tools.base import ToolRegistry
from bot.clock import Clock
from bot.jobs.briefings.morning import Briefings
from bot.jobs.briefings.weekly_review import WeeklyReviews
from bot.jobs.calendars.caldav import SecretBox
from bot.jobs.calendars.own import CalendarSettings, OwnCalendars
from bot.jobs.calendars.proposals import SCAN_JOB, Proposals
from bot.jobs.engine.leader import LeaderLock, leader_lock
from bot.jobs.engine.scheduler import JobService, JobSpec
from bot.jobs.engine.timer import DueTimer
from bot.jobs.outbox.delivery import AwayDeadlines, Outbox
from bot.jobs.reminders.service import Reminders
from bot.jobs.views import JobViews
from storage.db import Database


@dataclass(frozen=True, slots=True)
class JobSettings:
    """The knobs of the jobs feature (from Settings)."""

    heartbeat: float = 2.0
    lease_seconds: float = 8.0
    send_rate: float = 30.0
    late_hours: float = 3.0
    proposal_ttl_days: float = 7.0
    away: AwayDeadlines = field(default_factory=AwayDeadlines)
    """How long pushes wait for an offline pendant before the next linked channel."""
    calendars: CalendarSettings = field(default_factory=CalendarSettings)
    """The user's own calendars: refresh interval and expansion window."""
    calendar_key: str | None = None
    """Fernet key sealing CalDAV passwords (LIFEBOT_CALENDAR_KEY)."""


@dataclass
class Jobs:
    """Every object of the jobs feature."""

    outbox: Outbox
    briefings: Briefings
    reminders: Reminders
    proposals: Proposals
    service: JobService
    calendars: OwnCalendars
    """The user's own calendars: ICS import, feed subscriptions, CalDAV."""
    views: JobViews
    """What the pages read and queue: reminders, the calendar, proposals, pushes."""
    reviews: WeeklyReviews | None = None
    """The opt-in weekly journal review (None when built without the journal)."""

    async def plan_and_send(self, now: datetime) -> str:
        """Run every planner once and send what is due (tests, ``/briefing``-less catch-up)."""
        parts = [
            await self.briefings.plan(now),
            *([f"reviews {await self.reviews.plan(now)}"] if self.reviews else []),
            f"reminders fired {await self.reminders.fire_due(now)}",
            await self.proposals.expire(now),
        ]
        stats = await self.outbox.run_due(now)
        return "; ".join([*parts, stats.summary()])

    async def after_turn(self, _turn: object) -> None:
        """Dispatcher hook: a new message may hold a plan, so the proposal scan runs soon."""
        await self.service.run_soon(SCAN_JOB)


def build_jobs(
    *,
    db: Database,
    llm: LLM,
    tools: ToolRegistry,
    adapters: Mapping[str, ChannelAdapter],
    clock: Clock,
    persona_path: Path,
    settings: JobSettings | None = None,
    lock: LeaderLock | None = None,
    journal: JournalService | None = None,
    extra: Sequence[JobSpec] = (),
) -> Jobs:
    """Wire outbox, briefings, reminders, proposals and the scheduler together.

    ``extra``: other rooms' background work that must run in one process only (memory).
    """
    cfg = settings or JobSettings()
    late = timedelta(hours=cfg.late_hours)
    # Briefings are queued a little ahead with their exact due time, so the due timer sends
    # them on the minute instead of at the next planning pass.
    briefings = Briefings(
        db=db,
        llm=llm,
        tools=tools,
        clock=clock,
        persona_path=persona_path,
        late_limit=late,
        lead=timedelta(minutes=2),
        journal=journal,
    )
    outbox = Outbox(
        db=db,
        adapters=adapters,
        clock=clock,
        composers={"briefing": briefings.compose_row},
        late_limit=late,
        rate_per_channel=cfg.send_rate,
        away=cfg.away,
    )
    reminders = Reminders(db)
    calendars = OwnCalendars(db, clock, cfg.calendars, secrets=SecretBox(cfg.calendar_key))
    proposals = Proposals(
        db=db,
        llm=llm,
        ttl=timedelta(days=cfg.proposal_ttl_days),
        on_accept=calendars.write_accepted,
    )

    async def plan_briefings(now: datetime) -> str:
        result = await briefings.plan(now)
        outbox.kick()
        return result

    async def fire_reminders(now: datetime) -> str:
        fired = await reminders.fire_due(now)
        if fired:
            outbox.kick()
        return f"fired {fired}"

    async def scan(now: datetime) -> str:
        result = await proposals.scan(now)
        outbox.kick()
        return result

    async def reconcile(now: datetime) -> str:
        return f"settled {await outbox.reconcile(now)}"

    reviews = WeeklyReviews(db, journal) if journal is not None else None

    async def plan_reviews(now: datetime) -> str:
        if reviews is None:
            return "no journal"
        result = await reviews.plan(now)
        outbox.kick()
        return result

    specs = [
        JobSpec("briefings.plan", 60, plan_briefings, "queue morning briefings that are due"),
        JobSpec("reminders.fire", 10, fire_reminders, "queue reminders that are due"),
        JobSpec(SCAN_JOB, 60, scan, "propose events found in chats and transcripts"),
        JobSpec("proposals.expire", 900, proposals.expire, "expire unanswered proposals"),
        JobSpec("outbox.reconcile", 60, reconcile, "settle pushes a stopped process left"),
        JobSpec("journal.review", 300, plan_reviews, "queue opted-in weekly journal reviews"),
        JobSpec("calendars.refresh", 60, calendars.refresh, "re-read subscribed calendars"),
        *extra,  # features above jobs (memory's pass, location's scan) bring their own jobs
    ]
    service = JobService(
        db=db,
        clock=clock,
        outbox=outbox,
        lock=lock or leader_lock(db, timedelta(seconds=cfg.lease_seconds)),
        jobs=specs,
        heartbeat=cfg.heartbeat,
        timer=DueTimer(db=db, clock=clock, reminders=reminders, outbox=outbox, timed=specs),
    )
    views = JobViews(db, outbox)
    return Jobs(outbox, briefings, reminders, proposals, service, calendars, views, reviews)
