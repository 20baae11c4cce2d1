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
from bot.jobs.calendars.proposals import rename_command
from bot.jobs.localtime import in_quiet_hours, local_instant, quiet_hours_end
from bot.location.areas import AreaNames
from bot.location.enrich import Enriched, Enricher, History, PastEvent
from bot.location.places import parse_aliases
from bot.location.proposing import SCAN_AT, Busy, StayFacts, Suggestion, scan_time, suggestions
from storage.db import Database
from storage.models import Proposal, User
from storage.repos.answers import AnswerRepo
from storage.repos.calendar import CalendarRepo, title_key
from storage.repos.job_state import JobStateRepo
from storage.repos.location import LocationRepo
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

SETTLE = timedelta(minutes=30)
"""A stay whose last fix is this recent may still be going on: it waits for the next scan."""
FIRST_LOOKBACK = timedelta(days=1)
MAX_WITH_BUTTONS = 8
"""Proposals offered with Accept / Decline / Rename buttons in one push (Slack allows 25
buttons in a message); the rest are answered with /proposal."""
QUESTION_OPEN = timedelta(hours=12)
"""How long "What was this place?" waits for a reply after the push arrives."""


def _cursor_id(user_id: int) -> str:
    return f"location.proposals:{user_id}"


class StayProposals:
    """Runs the daily scan for every user with location on."""

    def __init__(
        self,
        db: Database,
        ttl: timedelta = timedelta(days=7),
        areas: AreaNames | None = None,
        enricher: Enricher | None = None,
    ) -> None:
        self.db = db
        self.ttl = ttl
        self.areas = areas
        """Names unnamed places after the nearest town in the proposal's title."""
        self.enricher = enricher or Enricher(None)
        """Titles from the place's history (the fast model when one is configured)."""

    async def scan(self, now: datetime) -> str:
        """Scan every user whose local scan time has come today and who was not scanned yet."""
        async with self.db.session() as s:
            users = await UserRepo(s).all()
        made = 0
        for user in users:
            assert user.id is not None
            async with self.db.session() as s:
                setting = await LocationRepo(s).setting(user.id)
            if setting is None or not setting.enabled:
                continue
            made += await self.scan_user(user, now, scan_time(setting.scan_at))
        return f"proposed {made} from stays"

    async def next_due(self, now: datetime) -> datetime | None:
        """The soonest instant a user's evening scan is due (now or past: due now).

        The leader's due timer sleeps until it, so proposals come at the time the person set,
        not up to one poll later.
        """
        async with self.db.session() as s:
            soonest: datetime | None = None
            for setting in await LocationRepo(s).enabled_settings():
                user = await UserRepo(s).get(setting.user_id)
                if user is None:
                    continue
                tz = zone(user.timezone)
                today = now.astimezone(tz).date()
                done = await JobStateRepo(s).cursor(_cursor_id(setting.user_id) + ":day")
                scanned = done is not None and done >= today.toordinal()
                day = today + timedelta(days=1) if scanned else today
                due = local_instant(day, scan_time(setting.scan_at), tz)
                soonest = due if soonest is None else min(soonest, due)
        return soonest

    async def scan_user(self, user: User, now: datetime, at: time = SCAN_AT) -> int:
        """The user's scan if due (once per local day, from ``at``); how many were proposed."""
        assert user.id is not None
        tz = zone(user.timezone)
        local = now.astimezone(tz)
        if now < local_instant(local.date(), at, tz):
            return 0
        day = local.date().toordinal()
        key = _cursor_id(user.id)
        cutoff = now - SETTLE
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
            chosen, histories = await self._choose(s, user.id, since, cutoff, tz)
        # The model (if any) is asked outside the transaction: it may take seconds.
        titled = [
            await self.enricher.title(
                sug.place, sug.start, sug.end, tz, histories.get(sug.stay_id, History()), sug.area
            )
            for sug in chosen
        ]
        async with self.db.session() as s:
            states = JobStateRepo(s)
            last_day = await states.cursor(key + ":day")
            if last_day is not None and last_day >= day:
                return 0  # another run finished this day meanwhile
            made = await self._propose(
                s, user, list(zip(chosen, titled, strict=True)), tz, now, local.date().isoformat()
            )
            await states.advance(key, int(cutoff.timestamp()))
            await states.advance(key + ":day", day)
        return made

    async def _choose(
        self, s: AsyncSession, user_id: int, since: datetime, cutoff: datetime, tz: ZoneInfo
    ) -> tuple[list[Suggestion], dict[int, History]]:
        """The stays that ended in (since, cutoff] the rules allow, and their places' history."""
        repo = LocationRepo(s)
        places = {p.id: p for p in await repo.places(user_id)}
        stays = [
            st
            for st in await repo.stays_between(user_id, since - timedelta(days=2), cutoff)
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
        calendar = CalendarRepo(s)
        if facts:
            lo = min(f.start for f in facts)
            hi = max(f.end for f in facts)
            events = [
                Busy(e.start_at, e.end_at, e.all_day)
                for e in await calendar.events_between(user_id, lo, hi)
            ]
        chosen = suggestions(facts, events, tz)
        histories: dict[int, History] = {}
        by_stay = {st.id: st for st in stays}
        for sug in chosen:
            stay = by_stay.get(sug.stay_id)
            place = places.get(stay.place_id) if stay is not None else None
            if place is None or place.id is None:
                continue
            earlier = await repo.last_stays_at(user_id, place.id, sug.start, limit=10)
            past = await calendar.events_at_place(
                user_id, [place.name, *parse_aliases(place.aliases)], sug.start
            )
            histories[sug.stay_id] = History(
                [(st.start, st.end) for st in earlier],
                [PastEvent(e.title, e.start_at, tuple(e.people or ())) for e in past],
            )
        return chosen, histories

    async def _propose(
        self,
        s: AsyncSession,
        user: User,
        chosen: list[tuple[Suggestion, Enriched]],
        tz: ZoneInfo,
        now: datetime,
        day: str,
    ) -> int:
        assert user.id is not None
        if not chosen:
            return 0
        repo = CalendarRepo(s)
        lines: list[str] = []
        buttons: list[tuple[str, str] | tuple[str, str, int]] = []
        first_unknown: int | None = None
        for n, (sug, told) in enumerate(chosen, 1):
            p = await repo.add_proposal(
                Proposal(
                    user_id=user.id,
                    title=told.title,
                    title_key=title_key(told.title),
                    start_at=sug.start,
                    end_at=sug.end,
                    place=sug.place,
                    people=told.people or None,
                    source="location",
                    created_at=now,
                    expires_at=now + self.ttl,
                )
            )
            assert p.id is not None
            # Renaming a stay at an unnamed place means naming the place: the answer creates it.
            rename = rename_command(p)
            if sug.place is None and first_unknown is None:
                first_unknown = p.id
            ask = "" if sug.place else " What was this place?"
            line = (
                told.title
                if told.plain
                else f"{told.title} ({sug.title(tz).removeprefix('Time at ')})"
            )
            if told.people:
                line += f", with {', '.join(told.people)}?"
            lines.append(f"{n}. {line}{ask}")
            if n <= MAX_WITH_BUTTONS:
                buttons += [
                    (f"Accept {n}", f"/proposal yes {p.id}", n),
                    (f"Decline {n}", f"/proposal no {p.id}", n),
                    (f"Rename {n}", rename, n),
                ]
        if len(chosen) > MAX_WITH_BUTTONS:
            lines.append("Answer the rest with /proposal yes|no|rename ID.")
        if first_unknown is not None:
            lines.append("Reply with the name of the first new place, or press Rename.")
            # The push may wait for quiet hours to end: the question opens when it arrives.
            since = now
            if in_quiet_hours(now, tz, user.quiet_start, user.quiet_end):
                since = quiet_hours_end(now, tz, user.quiet_end or "07:00")
            await AnswerRepo(s).ask(
                user.id, f"/place name {first_unknown}", since, since + QUESTION_OPEN
            )
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
