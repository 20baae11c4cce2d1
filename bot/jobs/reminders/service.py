"""Reminders: parse the request, confirm it in words, fire it through the outbox.

Firing is one transaction: the push goes into the outbox under a unique key
(``reminder:<user>:<id>:<n>``) and the reminder moves on to its next time (or is done). A
restart at any point therefore neither loses nor repeats a reminder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.clock import zone
from bot.jobs.localtime import day_first, when_words
from bot.jobs.reminders.phrases import (
    ParsedReminder,
    TooManyReminders,
    describe_recurrence,
    next_occurrence,
    parse_reminder,
)
from storage.db import Database
from storage.models import Reminder, User
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.reminders import ReminderRepo
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

MAX_ACTIVE = 1000
"""The most reminders one user can have waiting: past it a new one is refused in words (a
runaway script or a flood cannot fill the table or the firing job's passes)."""
LIST_LINES = 50
"""The most reminders a chat listing shows (a thousand would be a dozen chat messages)."""
LATE_NOTE_AFTER = timedelta(minutes=10)
"""A reminder that fires later than this (downtime) says when it was due."""


def confirmation(parsed: ParsedReminder, tz_name: str, now: datetime) -> str:
    """``I'll remind you Tue 17:00 to call mom`` (or ``every Monday at 09:00 ...``)."""
    tz = zone(tz_name)
    when = when_words(parsed.first_at, tz, now)
    what = f" {parsed.lead} {parsed.text}" if parsed.text else ""
    note = f" {parsed.note}" if parsed.note else ""
    if parsed.recurrence is not None:
        return (
            f"I'll remind you {describe_recurrence(parsed.recurrence)}{what} (first: {when}).{note}"
        )
    return f"I'll remind you {when}{what}.{note}"


def reminder_line(r: Reminder, tz_name: str, now: datetime) -> str:
    """One reminder in a list: ``#3 Tue 17:00 call mom (every Monday at 09:00)``."""
    when = when_words(r.next_at, zone(tz_name), now)
    repeat = f" ({describe_recurrence(r.recurrence)})" if r.recurrence else ""
    return f"#{r.id} {when} {r.text or 'reminder'}{repeat}{about(r)}"


def about(r: Reminder) -> str:
    """`` (at Jordan's house; with Ana Silva)`` when the reminder names a place or people."""
    extra = ([f"at {r.place}"] if r.place else []) + (
        ["with " + ", ".join(r.people)] if r.people else []
    )
    return f" ({'; '.join(extra)})" if extra else ""


@dataclass(slots=True)
class Created:
    """A stored reminder and the words confirming it."""

    reminder: Reminder
    text: str


class Reminders:
    """Create, list, cancel and fire reminders."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self,
        user: User,
        request: str,
        now: datetime,
        *,
        place: str | None = None,
        people: list[str] | None = None,
    ) -> Created:
        """Parse and store a request; PhraseError (plain words) when it has no readable time.

        ``place`` and ``people`` are what the reminder is about, as the user named them.
        """
        assert user.id is not None
        parsed = parse_reminder(
            request, now, zone(user.timezone), day_first=day_first(user.date_order, user.timezone)
        )
        async with self.db.session() as s:
            if await ReminderRepo(s).count_active(user.id) >= MAX_ACTIVE:
                raise TooManyReminders(
                    f"You have {MAX_ACTIVE} reminders waiting, the most I keep. Cancel some "
                    "first (/reminders lists them)."
                )
            reminder = await ReminderRepo(s).add(
                Reminder(
                    user_id=user.id,
                    text=parsed.text[:300],
                    request=request[:500],
                    next_at=parsed.first_at,
                    recurrence=parsed.recurrence,
                    timezone=user.timezone,
                    created_at=now,
                    place=(place or "").strip()[:120] or None,
                    people=[p.strip()[:80] for p in people or [] if p.strip()][:10] or None,
                )
            )
        return Created(reminder, confirmation(parsed, user.timezone, now) + about(reminder))

    async def follow_zones(self, now: datetime, user_id: int | None = None) -> int:
        """Move repeating reminders to the local times of a zone their user has moved to.

        "Every day at 08:00" set in New York means 08:00 in Lisbon once the user says they
        live there (by /tz, Settings, the API or the assistant's tool: whichever path changed
        the zone, this finds it). A one-off reminder keeps its moment (a call booked for 11:00
        New York time is still at that instant). Returns how many moved.
        """
        moved = 0
        async with self.db.session() as s:
            for r, tz_name in await ReminderRepo(s).zone_moved(user_id):
                kind = (r.recurrence or {}).get("kind")
                if r.recurrence and kind != "interval" and r.next_at > now:
                    # An occurrence already due (about to fire) keeps its time.
                    r.next_at = next_occurrence(r.recurrence, now, zone(tz_name))
                    moved += 1
                r.timezone = tz_name
                s.add(r)
        return moved

    async def listing(self, user: User, now: datetime) -> str:
        """The user's active reminders in words."""
        assert user.id is not None
        await self.follow_zones(now, user.id)
        async with self.db.session() as s:
            items = await ReminderRepo(s).active(user.id)
        if not items:
            return "You have no reminders."
        lines = [reminder_line(r, user.timezone, now) for r in items[:LIST_LINES]]
        if len(items) > LIST_LINES:
            lines.append(f"... and {len(items) - LIST_LINES} more (the web page lists them all).")
        return "\n".join(lines)

    async def cancel(self, user_id: int, reminder_id: int) -> Reminder | None:
        """Cancel one of the user's reminders."""
        async with self.db.session() as s:
            return await ReminderRepo(s).cancel(user_id, reminder_id)

    async def fire_due(self, now: datetime) -> int:
        """Queue every due reminder and advance it, atomically; returns how many fired."""
        fired = 0
        await self.follow_zones(now)
        async with self.db.session() as s:
            due = await ReminderRepo(s).due(now)
            users = {r.user_id for r in due}
            zones = {uid: (await UserRepo(s).get(uid)) for uid in users}
            pushes = []
            for r in due:
                assert r.id is not None
                user = zones.get(r.user_id)
                tz_name = user.timezone if user is not None else r.timezone
                pushes.append(
                    Push(
                        user_id=r.user_id,
                        kind="reminder",
                        key=f"reminder:{r.user_id}:{r.id}:{r.fired}",
                        due_at=r.next_at,
                        text=self._text(r, tz_name, now),
                        urgent=True,
                        extra={"reminder_id": r.id},
                    )
                )
                r.fired += 1
                if r.recurrence:
                    # Missed occurrences (downtime) collapse into the one push above.
                    r.next_at = next_occurrence(r.recurrence, max(r.next_at, now), zone(tz_name))
                else:
                    r.status = "done"
                s.add(r)
                fired += 1
            if pushes:
                await OutboxRepo(s).enqueue(pushes, now)
        return fired

    @staticmethod
    def _text(r: Reminder, tz_name: str, now: datetime) -> str:
        text = (f"⏰ Reminder: {r.text}" if r.text else "⏰ Reminder!") + about(r)
        if now - r.next_at > LATE_NOTE_AFTER:
            local = r.next_at.astimezone(zone(tz_name))
            text += f" (this was due at {local:%H:%M}; I was offline)"
        return text
