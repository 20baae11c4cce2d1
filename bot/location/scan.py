"""The evening scan: stays that ended since the last scan become proposed events.

Once a day per user, at their local 21:30 (``SCAN_AT``), stays that ended since the previous
scan (and at least ``SETTLE`` ago, so a stay still going on waits for the next day) go through
the rules in ``proposing``. The proposals use the same table, Yes/No answer path and expiry as
the ones found in chat; one push a day lists them (the outbox holds it through quiet hours).
"""

from __future__ import annotations

import logging
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.clock import zone
from bot.location.areas import AreaNames
from bot.location.proposing import Busy, StayFacts, Suggestion, suggestions
from storage.db import Database
from storage.models import Proposal, User
from storage.repos.calendar import CalendarRepo, title_key
from storage.repos.job_state import JobStateRepo
from storage.repos.location import LocationRepo
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

SCAN_AT = time(21, 30)
"""Local time of the daily scan."""
SETTLE = timedelta(minutes=30)
"""A stay whose last fix is this recent may still be going on: it waits for the next scan."""
FIRST_LOOKBACK = timedelta(days=1)


def _cursor_id(user_id: int) -> str:
    return f"location.proposals:{user_id}"


class StayProposals:
    """Runs the daily scan for every user with location on."""

    def __init__(
        self, db: Database, ttl: timedelta = timedelta(days=7), areas: AreaNames | None = None
    ) -> None:
        self.db = db
        self.ttl = ttl
        self.areas = areas
        """Names unnamed places after the nearest town in the proposal's title."""

    async def scan(self, now: datetime) -> str:
        """Scan every user whose local scan time has come today and who was not scanned yet."""
        async with self.db.session() as s:
            users = await UserRepo(s).all()
        made = 0
        for user in users:
            assert user.id is not None
            async with self.db.session() as s:
                if not await LocationRepo(s).enabled(user.id):
                    continue
            made += await self.scan_user(user, now)
        return f"proposed {made} from stays"

    async def scan_user(self, user: User, now: datetime) -> int:
        """The user's scan if due (once per local day, from 21:30); how many were proposed."""
        assert user.id is not None
        tz = zone(user.timezone)
        local = now.astimezone(tz)
        due = datetime.combine(local.date(), SCAN_AT, tzinfo=tz)
        if local < due:
            return 0
        day = local.date().toordinal()
        key = _cursor_id(user.id)
        async with self.db.session() as s:
            states = JobStateRepo(s)
            last = await states.cursor(key)
            last_day = await states.cursor(key + ":day")
            if last_day is not None and last_day >= day:
                return 0
            since = (
                datetime.fromtimestamp(last, now.tzinfo)
                if last is not None
                else now - FIRST_LOOKBACK
            )
            cutoff = now - SETTLE
            repo = LocationRepo(s)
            places = {p.id: p for p in await repo.places(user.id)}
            stays = [
                st
                for st in await repo.stays_between(user.id, since - timedelta(days=2), cutoff)
                if since < st.end <= cutoff
            ]
            facts = []
            for st in stays:
                place = places.get(st.place_id)
                area = None
                if place is None and self.areas is not None:
                    area = await self.areas.near(st.lat, st.lon)
                facts.append(
                    StayFacts(
                        st.id or 0,
                        st.start,
                        st.end,
                        place.name if place else None,
                        place.kind if place else "normal",
                        area,
                    )
                )
            events = []
            if facts:
                lo = min(f.start for f in facts)
                hi = max(f.end for f in facts)
                events = [
                    Busy(e.start_at, e.end_at)
                    for e in await CalendarRepo(s).events_between(user.id, lo, hi)
                ]
            chosen = suggestions(facts, events, tz)
            made = await self._propose(s, user, chosen, tz, now, local.date().isoformat())
            await states.advance(key, int(cutoff.timestamp()))
            await states.advance(key + ":day", day)
        return made

    async def _propose(
        self,
        s: AsyncSession,
        user: User,
        chosen: list[Suggestion],
        tz: ZoneInfo,
        now: datetime,
        day: str,
    ) -> int:
        assert user.id is not None
        if not chosen:
            return 0
        repo = CalendarRepo(s)
        lines: list[str] = []
        buttons: list[tuple[str, str]] = []
        for n, sug in enumerate(chosen, 1):
            title = sug.title(tz)
            p = await repo.add_proposal(
                Proposal(
                    user_id=user.id,
                    title=title,
                    title_key=title_key(title),
                    start_at=sug.start,
                    end_at=sug.end,
                    place=sug.place,
                    source="location",
                    created_at=now,
                    expires_at=now + self.ttl,
                )
            )
            ask = "" if sug.place else " What was this place? (/place add NAME when you are there)"
            lines.append(f"{n}. {title}{ask}")
            buttons += [(f"Yes {n}", f"/proposal yes {p.id}"), (f"No {n}", f"/proposal no {p.id}")]
        await OutboxRepo(s).enqueue(
            [
                Push(
                    user_id=user.id,
                    kind="proposal",
                    key=f"location-proposals:{user.id}:{day}",
                    due_at=now,
                    text="Where you spent time today. Add to your calendar?\n" + "\n".join(lines),
                    buttons=buttons,
                )
            ],
            now,
        )
        log.info("proposed %d event(s) from stays for user %s", len(chosen), user.id)
        return len(chosen)
