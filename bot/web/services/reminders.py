"""The Reminders page's and API's operations, and the Today page's briefing."""

from __future__ import annotations

from bot.clock import Clock
from bot.jobs.reminders.service import Created
from bot.jobs.service import Jobs
from storage.models import Reminder, User


class WebReminders:
    """Reminders and briefings of one user at a time (another user's reminder is not found)."""

    def __init__(self, clock: Clock, jobs: Jobs) -> None:
        self.clock = clock
        self.jobs = jobs

    async def reminders(self, user: User) -> list[Reminder]:
        """Active reminders, soonest first."""
        assert user.id is not None
        # A zone changed a moment ago moves repeating reminders before they are shown.
        await self.jobs.reminders.follow_zones(self.clock.now(), user.id)
        return await self.jobs.views.reminders(user.id)

    async def add_reminder(self, user: User, request: str) -> Created:
        """Create a reminder from words (PhraseError in plain words when unreadable)."""
        return await self.jobs.reminders.create(user, request, self.clock.now())

    async def cancel_reminder(self, user: User, reminder_id: int) -> Reminder | None:
        """Cancel; None when it is not the user's active reminder."""
        assert user.id is not None
        return await self.jobs.reminders.cancel(user.id, reminder_id)

    async def briefing_preview(self, user: User) -> str:
        """Today's briefing as it would read now."""
        text, _ = await self.jobs.briefings.compose(user, self.clock.now())
        return text

    async def send_briefing(self, user: User) -> None:
        """Queue a briefing for right now through the outbox (composed just before sending)."""
        assert user.id is not None
        await self.jobs.views.briefing_now(user.id, self.clock.now())
