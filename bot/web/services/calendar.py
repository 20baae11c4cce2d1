"""The Calendar page's, the feed's and the API's operations: events and proposed events."""

from __future__ import annotations

from datetime import timedelta

from bot.clock import Clock
from bot.jobs.calendars.own import from_subscription
from bot.jobs.service import Jobs
from storage.models import CalendarEvent, Proposal, User


class WebCalendar:
    """Events and proposals of one user at a time (another user's proposal is not found)."""

    def __init__(self, clock: Clock, jobs: Jobs) -> None:
        self.clock = clock
        self.jobs = jobs

    async def events(self, user: User, days: int = 60) -> list[CalendarEvent]:
        """Calendar events from a day ago to ``days`` ahead."""
        assert user.id is not None
        now = self.clock.now()
        return await self.jobs.views.events(
            user.id, now - timedelta(days=1), now + timedelta(days=days)
        )

    async def published_events(self, user: User) -> list[CalendarEvent]:
        """The live events lifebot's calendar feed publishes.

        All but those read from the person's own linked calendars: their calendar app has those
        already, and a feed that republished them could be read back as a new copy each time.
        """
        assert user.id is not None
        events = await self.jobs.views.all_events(user.id)
        return [e for e in events if not from_subscription(e.source)]

    async def proposals(self, user: User) -> list[Proposal]:
        """Proposed events waiting for an answer."""
        assert user.id is not None
        return await self.jobs.views.proposals(user.id, self.clock.now())

    async def answer_proposal(self, user: User, proposal_id: int, yes: bool) -> str | None:
        """Accept or decline; None when the proposal is not the user's.

        ProposalClosed (in words) when it was answered already or has expired.
        """
        assert user.id is not None
        if await self.jobs.views.proposal(user.id, proposal_id) is None:
            return None
        return await self.jobs.proposals.answer(user, proposal_id, yes, self.clock.now())

    async def proposal(self, user: User, proposal_id: int) -> Proposal | None:
        """One of the user's proposals (None for another user's)."""
        assert user.id is not None
        return await self.jobs.views.proposal(user.id, proposal_id)

    async def rename_proposal(self, user: User, proposal_id: int, title: str) -> str | None:
        """A new title for a pending proposal; None when the proposal is not the user's.

        ProposalClosed (in words) when it was answered already or has expired.
        """
        if await self.proposal(user, proposal_id) is None:
            return None
        return await self.jobs.proposals.rename(user, proposal_id, title, self.clock.now())

    def proposal_words(self, p: Proposal, user: User) -> str:
        """A proposal as the question the chat asks."""
        return self.jobs.proposals.question(p, user.timezone)
