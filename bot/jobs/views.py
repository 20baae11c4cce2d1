"""What the pages read and queue of the jobs feature: reminders, the calendar, proposals, pushes.

Creating and cancelling reminders, answering proposals and composing briefings have their
own services (``Reminders``, ``Proposals``, ``Briefings``); this is the rest the pages need,
each call its own transaction. A push queued here is sent by the outbox, which is kicked so
it leaves at once rather than on the next poll.
"""

from __future__ import annotations

from datetime import datetime

from bot.jobs.outbox.delivery import Outbox
from storage.db import Database
from storage.models import CalendarEvent, Delivery, JobLease, JobState, Proposal, Reminder
from storage.repos.calendar import CalendarRepo
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.reminders import ReminderRepo
from storage.repos.web import WebViewRepo


class JobViews:
    """Reads and small changes of the jobs feature for the pages and the API."""

    def __init__(self, db: Database, outbox: Outbox) -> None:
        self.db = db
        self.outbox = outbox

    async def reminders(self, user_id: int) -> list[Reminder]:
        """The user's active reminders, soonest first."""
        async with self.db.session() as s:
            return sorted(await ReminderRepo(s).active(user_id), key=lambda r: r.next_at)

    async def events(self, user_id: int, start: datetime, end: datetime) -> list[CalendarEvent]:
        """Every one of the user's calendar events between two instants.

        All of them: the API pages this list and MCP's ``upcoming`` lists it, and neither may
        stop short without saying so (the chat's readers keep their own cap).
        """
        async with self.db.session() as s:
            return await CalendarRepo(s).events_between(user_id, start, end, limit=None)

    async def all_events(self, user_id: int) -> list[CalendarEvent]:
        """Every live event of the user (the calendar feed)."""
        async with self.db.session() as s:
            return await CalendarRepo(s).all_events(user_id)

    async def proposals(self, user_id: int, now: datetime) -> list[Proposal]:
        """Proposed events waiting for the user's answer."""
        async with self.db.session() as s:
            return await CalendarRepo(s).pending_proposals(user_id, now)

    async def proposal(self, user_id: int, proposal_id: int) -> Proposal | None:
        """One of the user's proposals (None for another user's)."""
        async with self.db.session() as s:
            return await CalendarRepo(s).proposal(user_id, proposal_id)

    async def briefing_now(self, user_id: int, now: datetime) -> None:
        """Queue a briefing for right now (composed just before it is sent).

        One per minute, so a double click sends one; urgent, since it was asked for now,
        so quiet hours do not hold it back.
        """
        push = Push(
            user_id, "briefing", f"briefing:{user_id}:web:{now:%Y%m%dT%H%M}", now, urgent=True
        )
        async with self.db.session() as s:
            await OutboxRepo(s).enqueue([push], now)
        self.outbox.kick()

    async def notice(self, user_id: int, key: str, text: str, now: datetime) -> None:
        """Queue a notice (sent once per ``key``, whatever asks again)."""
        async with self.db.session() as s:
            await OutboxRepo(s).enqueue([Push(user_id, "notice", key, now, text=text)], now)
        self.outbox.kick()

    async def deliveries(self, limit: int = 100) -> list[Delivery]:
        """The newest pushes of everyone (the owner's page)."""
        async with self.db.session() as s:
            return await WebViewRepo(s).all_deliveries(limit)

    async def retry_delivery(self, delivery_id: int, now: datetime) -> bool:
        """Queue a failed push again; False when it is not a failed push."""
        async with self.db.session() as s:
            done = await WebViewRepo(s).retry_failed(delivery_id, now)
        if done:
            self.outbox.kick()
        return done

    async def job_states(self) -> tuple[list[JobState], list[JobLease]]:
        """Scheduled jobs' last runs and the leader leases."""
        async with self.db.session() as s:
            repo = WebViewRepo(s)
            return await repo.jobs(), await repo.leases()
