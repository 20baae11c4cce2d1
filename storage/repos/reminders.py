"""One user's reminders, and the due ones across users for the firing job."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Reminder, User


class ReminderRepo:
    """Adds, lists, cancels and advances reminders."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, reminder: Reminder) -> Reminder:
        """Store a new reminder."""
        self.s.add(reminder)
        await self.s.flush()
        return reminder

    async def active(self, user_id: int, *, before: datetime | None = None) -> list[Reminder]:
        """The user's active reminders by next time (optionally only those before ``before``)."""
        q = select(Reminder).where(Reminder.user_id == user_id, Reminder.status == "active")
        if before is not None:
            q = q.where(col(Reminder.next_at) < before)
        res = await self.s.exec(q.order_by(col(Reminder.next_at), col(Reminder.id)))
        return list(res.all())

    async def count_active(self, user_id: int) -> int:
        """How many active reminders the user has."""
        res = await self.s.exec(
            select(func.count())
            .select_from(Reminder)
            .where(Reminder.user_id == user_id, Reminder.status == "active")
        )
        return int(res.one())

    async def cancel(self, user_id: int, reminder_id: int) -> Reminder | None:
        """Cancel one of the user's active reminders; None when it is not theirs or not active."""
        res = await self.s.exec(
            select(Reminder).where(
                Reminder.id == reminder_id,
                Reminder.user_id == user_id,
                Reminder.status == "active",
            )
        )
        reminder = res.first()
        if reminder is not None:
            reminder.status = "cancelled"
            self.s.add(reminder)
        return reminder

    async def zone_moved(self, user_id: int | None = None) -> list[tuple[Reminder, str]]:
        """Active reminders set in a zone their user has since left, with the user's zone now.

        ``user_id`` narrows it to one user (a listing); None looks across users (the firing job).
        """
        q = (
            select(Reminder, User.timezone)
            .join(User, col(User.id) == col(Reminder.user_id))
            .where(Reminder.status == "active", col(Reminder.timezone) != col(User.timezone))
        )
        if user_id is not None:
            q = q.where(Reminder.user_id == user_id)
        res = await self.s.exec(q.order_by(col(Reminder.id)))
        return [(r, tz) for r, tz in res.all()]

    async def next_time(self) -> datetime | None:
        """When the soonest active reminder is due, across users (None: none is active)."""
        res = await self.s.exec(
            select(func.min(col(Reminder.next_at))).where(Reminder.status == "active")
        )
        return res.one()

    async def due(self, now: datetime, limit: int = 500) -> list[Reminder]:
        """Active reminders whose time has come, across users (the firing job only)."""
        res = await self.s.exec(
            select(Reminder)
            .where(Reminder.status == "active", col(Reminder.next_at) <= now)
            .order_by(col(Reminder.next_at), col(Reminder.id))
            .limit(limit)
        )
        return list(res.all())
