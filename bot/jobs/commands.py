"""Slash commands of the jobs feature, the same in every channel.

/briefing (now | at HH:MM | on | off), /quiet (HH:MM-HH:MM | off), /tz (zone or city),
/remind, /reminders (cancel ID), /proposal (yes|no ID), /calendar, /channel, /settings.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.chat import CommandContext, CommandReply, CommandTable, row_id
from bot.clock import Clock, parse_hhmm, zone
from bot.errors import CalendarError
from bot.jobs.calendars.events import event_line
from bot.jobs.calendars.proposals import ProposalClosed, proposal_buttons
from bot.jobs.localtime import day_first, hhmm, in_quiet_hours, local_instant
from bot.jobs.reminders.phrases import PhraseError
from bot.jobs.service import Jobs
from bot.jobs.zones import ZONES
from storage.db import Database
from storage.models import User
from storage.repos.calendar import CalendarRepo
from storage.repos.outbox import OutboxRepo
from storage.repos.users import UserRepo

_QUIET = re.compile(r"^\s*(.+?)\s*(?:-|\u2013|\bto\b)\s*(.+?)\s*$")


def settings_text(user: User) -> str:
    """The user's schedule settings in one line (also used by ``lifebot users``)."""
    briefing = f"briefing {user.briefing_time}" if user.briefing_enabled else "briefing off"
    quiet = (
        f"quiet {user.quiet_start}-{user.quiet_end}"
        if user.quiet_start and user.quiet_end
        else "quiet hours off"
    )
    prefer = user.preferred_channel or "auto"
    return f"tz={user.timezone}  {briefing}  {quiet}  channel={prefer}"


class JobCommands:
    """Command handlers; each touches only the calling user's data."""

    def __init__(self, jobs: Jobs, db: Database, clock: Clock) -> None:
        self.jobs = jobs
        self.db = db
        self.clock = clock

    def register(self, commands: CommandTable) -> None:
        """Add the jobs commands."""
        for name, fn, help_text in (
            ("briefing", self.briefing, "morning briefing: /briefing now | at 07:30 | on | off"),
            ("quiet", self.quiet, "quiet hours: /quiet 22:00-07:00 | off"),
            ("tz", self.tz, "set your time zone (/tz Europe/Lisbon or /tz Lisbon)"),
            ("remind", self.remind, "set a reminder (/remind at 5pm to call mom)"),
            ("reminders", self.reminders, "list reminders; /reminders cancel ID"),
            (
                "proposal",
                self.proposal,
                "answer a proposed event: /proposal yes ID | no ID | rename ID TITLE",
            ),
            (
                "calendar",
                self.calendar,
                "your next 7 days; /calendar add URL | list | remove ID (your own calendars)",
            ),
            ("channel", self.channel, "where pushes go first: /channel telegram | auto"),
            ("dates", self.dates, "how you write dates: /dates day-first | month-first | auto"),
            ("settings", self.settings, "your time zone, briefing and quiet hours"),
            ("voice", self.voice, "answers as voice notes too: /voice off | inbound | always"),
        ):
            commands.register(name, fn, help_text)

    async def _release_held(self, user_id: int) -> int:
        """Send pushes held for quiet hours now (they are checked against the new hours)."""
        async with self.db.session() as s:
            released = await OutboxRepo(s).release_held(user_id, self.clock.now())
        if released:
            self.jobs.outbox.kick()
        return released

    async def _update(self, user_id: int, **values: object) -> User | None:
        async with self.db.session() as s:
            user = await UserRepo(s).get(user_id)
            if user is None:
                return None
            for key, value in values.items():
                setattr(user, key, value)
            s.add(user)
            return user

    async def voice(self, ctx: CommandContext) -> CommandReply:
        """/voice off | inbound | always: answers as voice notes too (where the channel can)."""
        arg = ctx.args.strip().lower()
        words = {
            "off": "Answers come as text only.",
            "inbound": "When you send a voice note, the answer comes as text and a voice note.",
            "always": "Every answer comes as text and a voice note.",
        }
        if arg in words:
            await self._update(ctx.user_id, voice_replies=arg)
            return CommandReply(f"{words[arg]} /voice off | inbound | always changes it.")
        now = words.get(ctx.user.voice_replies, words["off"])
        return CommandReply(f"{now}\nUse /voice off | inbound | always.")

    async def briefing(self, ctx: CommandContext) -> CommandReply:
        """/briefing now | at HH:MM | on | off."""
        arg = ctx.args.strip().lower()
        now = self.clock.now()
        user = ctx.user
        if arg == "now":
            await self.jobs.calendars.refresh_user(user, now)  # the user's own calendars, fresh
            text, _ = await self.jobs.briefings.compose(user, now)
            return CommandReply(text)
        if arg in ("off", "stop"):
            await self._update(ctx.user_id, briefing_enabled=False, briefing_set_at=now)
            return CommandReply("Morning briefings are off. /briefing on brings them back.")
        if arg.startswith("at ") or re.match(r"^\d", arg) or arg in ("on", "start"):
            at_text = arg.removeprefix("at ").strip() if arg not in ("on", "start") else ""
            try:
                at = hhmm(parse_hhmm(at_text)) if at_text else user.briefing_time
            except ValueError as exc:
                return CommandReply(f"{exc}. Example: /briefing at 07:30")
            updated = await self._update(
                ctx.user_id, briefing_enabled=True, briefing_time=at, briefing_set_at=now
            )
            return CommandReply(self._briefing_words(updated or user, now))
        state = self._briefing_words(user, now) if user.briefing_enabled else "Briefings are off."
        return CommandReply(f"{state}\nUse /briefing now | at HH:MM | on | off.")

    def _briefing_words(self, user: User, now: datetime) -> str:
        tz = zone(user.timezone)
        at = parse_hhmm(user.briefing_time)
        local = now.astimezone(tz)
        nxt = local_instant(local.date(), at, tz)
        if nxt <= now:
            nxt = local_instant(local.date() + timedelta(days=1), at, tz)
        text = f"Your morning briefing comes at {user.briefing_time} ({user.timezone})."
        if in_quiet_hours(nxt, tz, user.quiet_start, user.quiet_end):
            text += (
                f" That is inside your quiet hours ({user.quiet_start}-{user.quiet_end}), "
                f"so it will arrive at {user.quiet_end}."
            )
        return text

    async def quiet(self, ctx: CommandContext) -> CommandReply:
        """/quiet HH:MM-HH:MM | off."""
        arg = ctx.args.strip().lower()
        if arg in ("off", "none"):
            await self._update(ctx.user_id, quiet_start=None, quiet_end=None)
            released = await self._release_held(ctx.user_id)
            note = f" {released} held message(s) are on their way." if released else ""
            return CommandReply(f"Quiet hours are off: I may message you at any time.{note}")
        m = _QUIET.match(arg)
        if not arg or m is None:
            u = ctx.user
            now_words = f"{u.quiet_start}-{u.quiet_end}" if u.quiet_start else "off"
            return CommandReply(
                f"Quiet hours: {now_words}. Set them with /quiet 22:00-07:00 or /quiet off."
            )
        try:
            start, end = hhmm(parse_hhmm(m.group(1))), hhmm(parse_hhmm(m.group(2)))
        except ValueError as exc:
            return CommandReply(f"{exc}. Example: /quiet 22:00-07:00")
        if start == end:
            return CommandReply(
                "Quiet hours need a start and an end that differ, e.g. /quiet 22:00-07:00"
            )
        await self._update(ctx.user_id, quiet_start=start, quiet_end=end)
        await self._release_held(ctx.user_id)  # held for the old window: checked again
        return CommandReply(
            f"Quiet hours set to {start}-{end} ({ctx.user.timezone}). Briefings and questions "
            "wait until they end; reminders you timed still come on time."
        )

    async def tz(self, ctx: CommandContext) -> CommandReply:
        """/tz, /tz Europe/Lisbon, /tz Lisbon."""
        if not ctx.args:
            local = self.clock.now().astimezone(zone(ctx.user.timezone))
            return CommandReply(
                f"Your time zone is {ctx.user.timezone} (local time {local:%H:%M}). "
                "Change it with /tz Area/City or a city name."
            )
        # A town name loads the town list once (about two seconds): not on the event loop.
        found = await asyncio.to_thread(ZONES.find, ctx.args)
        if found is None:
            return CommandReply(
                f"{ctx.args} is neither a time zone nor a town I know. Try a bigger town "
                "nearby, or a zone such as /tz Europe/Lisbon."
            )
        now = self.clock.now()
        await self._update(ctx.user_id, timezone=found.zone, briefing_set_at=now)
        ctx.user.timezone = found.zone
        local = now.astimezone(ZoneInfo(found.zone))
        moved = await self.jobs.reminders.follow_zones(now, ctx.user_id)
        which = (
            "repeating reminder keeps its local time"
            if moved == 1
            else f"{moved} repeating reminders keep their local times"
        )
        kept = (
            f" Your {which}, now in this zone; one-off reminders stay at the moment they "
            "were set for (/reminders shows them)."
            if moved
            else ""
        )
        return CommandReply(
            f"Time zone set to {found.words} (local time {local:%H:%M}). "
            f"Your briefing comes at {ctx.user.briefing_time} local time.{kept}"
        )

    async def remind(self, ctx: CommandContext) -> CommandReply:
        """/remind <request>."""
        if not ctx.args:
            return CommandReply(
                "Usage: /remind at 5pm to call mom (or in 20 minutes, every Monday at 9)"
            )
        try:
            created = await self.jobs.reminders.create(ctx.user, ctx.args, self.clock.now())
        except PhraseError as exc:
            return CommandReply(str(exc))
        return CommandReply(f"{created.text} (#{created.reminder.id}; /reminders to list)")

    async def reminders(self, ctx: CommandContext) -> CommandReply:
        """/reminders, /reminders cancel ID."""
        parts = ctx.args.split()
        if parts and parts[0].lower() in ("cancel", "delete", "remove"):
            ident = row_id(parts[1]) if len(parts) > 1 else None
            if ident is None:
                return CommandReply("Usage: /reminders cancel ID (send /reminders to see the ids)")
            gone = await self.jobs.reminders.cancel(ctx.user_id, ident)
            if gone is None:
                return CommandReply(f"You have no active reminder #{ident}.")
            return CommandReply(f"Cancelled reminder #{gone.id}: {gone.text or 'reminder'}")
        return CommandReply(await self.jobs.reminders.listing(ctx.user, self.clock.now()))

    async def proposal(self, ctx: CommandContext) -> CommandReply:
        """/proposal yes ID | no ID | rename ID [TITLE] (what the buttons send)."""
        parts = ctx.args.split()
        now = self.clock.now()
        verb = parts[0].lower() if parts else ""
        ident = row_id(parts[1]) if len(parts) >= 2 else None
        if verb == "rename" and ident is not None:
            title = ctx.args.split(maxsplit=2)[2] if len(parts) > 2 else ""
            if not title:
                return CommandReply(
                    "What should I call it? Send me the new title.",
                    expect=f"/proposal rename {ident}",
                )
            try:
                said = await self.jobs.proposals.rename(ctx.user, ident, title, now)
            except ProposalClosed as exc:  # a friendly word in chat: a late or double tap
                said = str(exc)
            return await self._with_rest(ctx, ident, said)
        if len(parts) == 2 and verb in ("yes", "no") and ident is not None:
            yes = verb == "yes"
            try:
                said = await self.jobs.proposals.answer(ctx.user, ident, yes, now)
            except ProposalClosed as exc:
                said = str(exc)
            return await self._with_rest(ctx, ident, said)
        async with self.db.session() as s:
            pending = await CalendarRepo(s).pending_proposals(ctx.user_id, now)
        if not pending:
            return CommandReply("No proposed events are waiting for you.")
        lines = [
            self.jobs.proposals.question(p, ctx.user.timezone) + f" (#{p.id})" for p in pending
        ]
        return CommandReply(
            "\n".join(lines)
            + "\nAnswer with /proposal yes ID, /proposal no ID or /proposal rename ID TITLE."
        )

    async def _with_rest(self, ctx: CommandContext, ident: int, said: str) -> CommandReply:
        """The answer, plus buttons for the rest of the same evening's list still waiting."""
        rest = await self.jobs.proposals.still_waiting(ctx.user_id, ident, self.clock.now())
        if not rest:
            return CommandReply(said)
        lines = "\n".join(f"#{p.id} {p.title}" for p in rest)
        return CommandReply(f"{said}\nStill waiting:\n{lines}", buttons=proposal_buttons(rest))

    async def calendar(self, ctx: CommandContext) -> CommandReply:  # noqa: PLR0911  # one reply per subcommand
        """/calendar: the next 7 days; /calendar add URL [NAME] | list | remove ID."""
        verb, _, rest = ctx.args.strip().partition(" ")
        verb = verb.lower()
        own = self.jobs.calendars
        if verb in ("add", "subscribe"):
            url, _, name = rest.strip().partition(" ")
            if not url:
                return CommandReply(
                    "Usage: /calendar add URL [NAME] with your calendar's ICS address "
                    "(https:// or webcal://)"
                )
            try:
                return CommandReply(await own.subscribe(ctx.user, url, name.strip() or None))
            except CalendarError as exc:
                return CommandReply(f"I could not subscribe: {exc}. Nothing was added.")
        if verb in ("list", "calendars", "sources"):
            return CommandReply(await own.listing(ctx.user_id))
        if verb in ("remove", "delete", "unsubscribe"):
            ident = row_id(rest)
            if ident is None:
                return CommandReply("Usage: /calendar remove ID (/calendar list shows the ids)")
            return CommandReply(await own.remove(ctx.user_id, ident))
        if verb:
            return CommandReply(
                "Usage: /calendar (your next 7 days) | /calendar add URL [NAME] | "
                "/calendar list | /calendar remove ID"
            )
        now = self.clock.now()
        async with self.db.session() as s:
            events = await CalendarRepo(s).events_between(ctx.user_id, now, now + timedelta(days=7))
        if not events:
            return CommandReply("Nothing in your calendar for the next 7 days.")
        tz = zone(ctx.user.timezone)
        return CommandReply("\n".join(event_line(e, tz) for e in events))

    async def channel(self, ctx: CommandContext) -> CommandReply:
        """/channel NAME | auto."""
        arg = ctx.args.strip().lower()
        async with self.db.session() as s:
            idents = await UserRepo(s).identities(ctx.user_id)
        mine = sorted({i.channel for i in idents})
        if not arg:
            return CommandReply(
                f"Pushes go first to: {ctx.user.preferred_channel or 'auto (oldest linked)'}. "
                f"Your channels: {', '.join(mine)}. Change with /channel NAME or /channel auto."
            )
        if arg == "auto":
            await self._update(ctx.user_id, preferred_channel=None)
            return CommandReply("Pushes go to your oldest linked channel first.")
        if arg not in mine:
            return CommandReply(
                f"You have no {arg} identity linked. Your channels: {', '.join(mine)}."
            )
        await self._update(ctx.user_id, preferred_channel=arg)
        return CommandReply(f"Briefings, reminders and questions now go to {arg} first.")

    async def dates(self, ctx: CommandContext) -> CommandReply:
        """/dates day-first (31/12) | month-first (12/31) | auto (by your time zone)."""
        arg = ctx.args.strip().lower().replace("_", "-")
        order = {"day-first": "dmy", "dmy": "dmy", "month-first": "mdy", "mdy": "mdy"}.get(arg)
        if order is None and arg != "auto":
            now_first = day_first(ctx.user.date_order, ctx.user.timezone)
            return CommandReply(
                f"I read 3/4 as {'3 April' if now_first else 'March 4'}. Change with "
                "/dates day-first, /dates month-first or /dates auto (by your time zone)."
            )
        updated = await self._update(ctx.user_id, date_order=order)
        user = updated or ctx.user
        first = day_first(user.date_order, user.timezone)
        return CommandReply(
            f"OK: I read 3/4 as {'3 April' if first else 'March 4'} in your reminders."
        )

    async def settings(self, ctx: CommandContext) -> CommandReply:
        """/settings."""
        async with self.db.session() as s:
            user = await UserRepo(s).get(ctx.user_id)
        return CommandReply(settings_text(user or ctx.user))
