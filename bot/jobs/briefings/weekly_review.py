"""The opt-in weekly journal review: planned per user's zone, sent through the outbox.

Stateless like the briefing planner: the key ``journal-review:<user>:<local date>`` makes each
week's review exactly-once. The text is written when the review falls due (from the week's
entries); a week with fewer than three entries is recorded as skipped, not sent. Quiet hours
hold it back like any non-urgent push.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta

from sqlmodel import col, select

from bot.agent.journal.service import JournalService
from bot.clock import parse_hhmm, zone
from bot.jobs.localtime import local_instant
from storage.db import Database
from storage.models import User
from storage.repos.journal import JournalRepo
from storage.repos.outbox import OutboxRepo, Push

KIND = "journal_review"
DEFAULT_TIME = time(19, 0)
WINDOW = timedelta(hours=12)
"""A review more than this late (after downtime) is not sent that week."""


class WeeklyReviews:
    """Plans the weekly reviews of everyone who opted in."""

    def __init__(self, db: Database, journal: JournalService) -> None:
        self.db = db
        self.journal = journal

    async def plan(self, now: datetime) -> str:
        """Queue the reviews that are due; say how many were queued or skipped."""
        async with self.db.session() as s:
            subs = await JournalRepo(s).review_subscribers()
            seen = await OutboxRepo(s).keys_since(KIND, now - timedelta(days=8))
            users = {
                u.id: u
                for u in (
                    await s.exec(select(User).where(col(User.id).in_([x.user_id for x in subs])))
                ).all()
            }
        pushes: list[Push] = []
        for sub in subs:
            user = users.get(sub.user_id)
            if user is None:
                continue
            tz = zone(user.timezone)
            today = now.astimezone(tz).date()
            day = today - timedelta(days=(today.weekday() - sub.review_weekday) % 7)
            try:
                at = parse_hhmm(sub.review_time)
            except ValueError:
                at = DEFAULT_TIME
            when = local_instant(day, at, tz)
            key = f"journal-review:{sub.user_id}:{day.isoformat()}"
            if when > now or when < sub.set_at or key in seen or now - when > WINDOW:
                continue
            text = await self.journal.weekly_review(sub.user_id, day)
            pushes.append(
                Push(
                    user_id=sub.user_id,
                    kind=KIND,
                    key=key,
                    due_at=when,
                    text=text,
                    status="pending" if text else "skipped",
                    note=None if text else "skipped: fewer than 3 journal entries that week",
                )
            )
        if not pushes:
            return "nothing due"
        async with self.db.session() as s:
            await OutboxRepo(s).enqueue(pushes, now)
        sent = sum(1 for p in pushes if p.status == "pending")
        return f"queued {sent}, skipped {len(pushes) - sent} (too few entries)"
