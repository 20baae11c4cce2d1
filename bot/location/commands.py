"""/location and /place: the switch, the phone-app token, forgetting, and named places.

Coordinates are never echoed into logs; replies name places and times, not numbers, except
where the person asked for their own position.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.chat import CommandContext, CommandReply, CommandTable, row_id
from bot.clock import parse_hhmm
from bot.jobs.calendars.proposals import MAX_OFFERED, proposal_buttons
from bot.jobs.localtime import hhmm
from bot.location.places import KINDS, norm, parse_aliases
from bot.location.service import LocationService, NamingError
from storage.models import Place

# ASCII digits only: \d alone also matches other scripts' digits, which no date here uses.
_DAY = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:\s*(?:\.\.|to|-)?\s*(\d{4}-\d{2}-\d{2}))?$", re.ASCII)
FIRST_DAY = date(2000, 1, 1)
"""No point is older (the phone apps' and the importers' rule): /location forget's earliest day."""
LAST_DAY = date(2099, 12, 31)
"""/location forget's latest day: far enough, and year 9999 + a day would overflow."""
_RENAME = re.compile(r"^(.+?)\s*(?:->|=)\s*(.+)$")
LOCATION_HELP = (
    "/location on - start recording where you are (share your live location here, or use "
    "OwnTracks / Overland)\n"
    "/location off - stop recording at once\n"
    "/location token - a token for the OwnTracks or Overland app (replaces the old one)\n"
    "/location revoke - the apps' token stops working\n"
    "/location forget all | YYYY-MM-DD [YYYY-MM-DD] - delete points and stays\n"
    "/location scan HH:MM | default - when the evening proposals are made (default 21:30)\n"
    "/location - what is recorded"
)
PLACE_HELP = (
    "/place add NAME - name where you are now (your last shared location)\n"
    "/place rename OLD -> NEW, /place delete NAME\n"
    "/place home NAME | /place ignore NAME | /place normal NAME - home-like places and "
    "ignored ones are never proposed as events\n"
    "/place alias NAME = other, names\n"
    "/place name ID NAME - name the new place of a proposed event (what Rename asks)\n"
    "/place - list your places"
)


class LocationCommands:
    """The commands, over the location service."""

    def __init__(self, location: LocationService, web_url: str) -> None:
        self.location = location
        self.web_url = web_url

    def register(self, commands: CommandTable) -> None:
        """Add /location and /place to the command table."""
        commands.register("location", self.location_cmd, "location history on/off, forget")
        commands.register("place", self.place_cmd, "name places (/place add gym)")

    async def location_cmd(self, ctx: CommandContext) -> CommandReply:  # noqa: PLR0911  # one branch per verb
        """/location [on|off|token|revoke|forget ...]."""
        verb, _, rest = ctx.args.partition(" ")
        verb, rest = verb.lower(), rest.strip()
        uid = ctx.user_id
        if verb == "on":
            await self.location.set_enabled(uid, True)
            return CommandReply(
                "Location is on. Share your live location with me here (attach > Location > "
                "Share My Live Location), or send /location token to connect OwnTracks or "
                "Overland. /location off stops it at once."
            )
        if verb == "off":
            await self.location.set_enabled(uid, False)
            return CommandReply(
                "Location is off: I record nothing more. What I have stays until you send "
                "/location forget all."
            )
        if verb == "token":
            if not ctx.msg.private:
                return CommandReply("Ask me for a location token in a private chat.")
            secret = await self.location.new_token(uid)
            base = f"{self.web_url}/api/location"
            return CommandReply(
                f"Your location token (any earlier one stops working): {secret}\n"
                f"OwnTracks: Mode HTTP, URL {base}/owntracks, Authentication on, any user "
                "name, this token as the password.\n"
                f"Overland: Receiver Endpoint {base}/overland, Access Token this token.\n"
                "Send /location revoke to stop it."
            )
        if verb == "revoke":
            await self.location.revoke_token(uid)
            return CommandReply("Your location token no longer works.")
        if verb == "forget":
            return await self._forget(ctx, rest)
        if verb == "scan":
            return await self._scan(ctx, rest)
        if verb in {"", "status"}:
            return await self._status(ctx)
        return CommandReply(LOCATION_HELP)

    async def _scan(self, ctx: CommandContext, rest: str) -> CommandReply:
        """/location scan HH:MM | default: when the evening proposals are made."""
        if rest.lower() in {"default", "reset"}:
            at = None
        else:
            try:
                at = parse_hhmm(rest)
            except ValueError:
                return CommandReply(
                    "Usage: /location scan 21:30 (your local time), or /location scan default."
                )
        await self.location.set_scan_time(ctx.user_id, at)
        shown = hhmm(await self.location.scan_time(ctx.user_id))
        return CommandReply(
            f"I'll look at where you spent time each day at {shown} your time and send what "
            "is worth a calendar entry (held back during your quiet hours until they end)."
        )

    async def _status(self, ctx: CommandContext) -> CommandReply:
        on = await self.location.enabled(ctx.user_id)
        last = await self.location.last_point(ctx.user_id)
        when = (
            f" Last position: {last.ts.astimezone(ZoneInfo(ctx.user.timezone)):%a %d %b %H:%M}."
            if last
            else " No positions stored."
        )
        scan = hhmm(await self.location.scan_time(ctx.user_id))
        return CommandReply(
            f"Location is {'on' if on else 'off'}.{when} Evening proposals at {scan}.\n\n"
            f"{LOCATION_HELP}"
        )

    async def _forget(self, ctx: CommandContext, rest: str) -> CommandReply:
        if rest.lower() == "all":
            points, stays = await self.location.forget(ctx.user_id)
            return CommandReply(
                f"Deleted all your location history ({points} points, {stays} stays)."
            )
        m = _DAY.match(rest)
        if m is None:
            return CommandReply(
                "Usage: /location forget all, or /location forget 2026-03-24 [2026-03-26] "
                "(local days, both included)."
            )
        try:
            first = date.fromisoformat(m.group(1))
            last = date.fromisoformat(m.group(2)) if m.group(2) else first
        except ValueError:
            return CommandReply(f"{rest} is not a date I can read (use YYYY-MM-DD).")
        if last < first:
            first, last = last, first
        if first < FIRST_DAY or last > LAST_DAY:
            return CommandReply(
                f"Use days from {FIRST_DAY} to {LAST_DAY}: I keep no location history outside "
                "them. To delete everything: /location forget all."
            )
        tz = ZoneInfo(ctx.user.timezone)
        start = _local_midnight(first, tz)
        end = _local_midnight(last + timedelta(days=1), tz)
        points, stays = await self.location.forget(ctx.user_id, start, end)
        span = f"{first}" if first == last else f"{first} to {last}"
        return CommandReply(
            f"Deleted your location history for {span} ({points} points, {stays} stays)."
        )

    async def place_cmd(self, ctx: CommandContext) -> CommandReply:  # noqa: PLR0911  # one branch per verb
        """/place [add|rename|delete|home|ignore|normal|alias] ..."""
        verb, _, rest = ctx.args.partition(" ")
        verb, rest = verb.lower(), rest.strip()
        if verb == "add" and rest:
            return await self._add(ctx, rest)
        if verb == "name" and rest:
            return await self._name(ctx, rest)
        if verb in {"", "list"}:
            places = await self.location.places(ctx.user_id)
            if not places:
                return CommandReply("You have no places yet.\n\n" + PLACE_HELP)
            return CommandReply("\n".join(_line(p) for p in places))
        if verb == "rename" and (m := _RENAME.match(rest)):
            return await self._change(ctx, m.group(1), new_name=m.group(2).strip())
        if verb == "alias" and (m := _RENAME.match(rest)):
            return await self._change(ctx, m.group(1), aliases=m.group(2))
        if verb == "delete" and rest:
            place = await self._find(ctx, rest)
            if place is None or place.id is None:
                return CommandReply(f"You have no place called {rest}.")
            await self.location.delete_place(ctx.user_id, place.id)
            return CommandReply(f"Deleted {place.name}; its stays are unnamed again.")
        kinds = {"home": "home", "ignore": "ignored", "ignored": "ignored", "normal": "normal"}
        if verb in kinds and rest:
            return await self._change(ctx, rest, kind=kinds[verb])
        return CommandReply(PLACE_HELP)

    async def _name(self, ctx: CommandContext, rest: str) -> CommandReply:
        """/place name ID [NAME]: without a name, ask "What was this place?"."""
        typed, _, name = rest.partition(" ")
        ident = row_id(typed)
        if ident is None:
            return CommandReply("Usage: /place name ID NAME (ID: the proposed event's number)")
        if not name.strip():
            return CommandReply(
                "What was this place? Send me its name.", expect=f"/place name {ident}"
            )
        tz = ZoneInfo(ctx.user.timezone)
        try:
            done = await self.location.name_from_proposal(ctx.user_id, ident, name, tz)
        except NamingError as exc:
            return CommandReply(str(exc))
        text = f"Saved {done.place.name}: I'll use that name for your stays there from now on."
        if done.renamed:
            text += "\n" + "\n".join(f"#{p.id} is now: {p.title}" for p in done.renamed)
        # A pressed button retired the evening's keyboard: offer these proposals' buttons again.
        nxt = done.next_unknown
        offered = proposal_buttons([*done.renamed, *([nxt] if nxt else [])][:MAX_OFFERED])
        if nxt is None:
            return CommandReply(text, buttons=offered)
        return CommandReply(
            f"{text}\nAnd #{nxt.id}, {nxt.title}: what was this place? Send me its name.",
            buttons=offered,
            expect=f"/place name {nxt.id}",
        )

    async def _find(self, ctx: CommandContext, name: str) -> Place | None:
        want = norm(name)
        for p in await self.location.places(ctx.user_id):
            if norm(p.name) == want or want in {norm(a) for a in parse_aliases(p.aliases)}:
                return p
        return None

    async def _add(self, ctx: CommandContext, name: str) -> CommandReply:
        if len(name) > MAX_NAME:
            return CommandReply(f"Keep place names under {MAX_NAME} characters.")
        if await self._find(ctx, name) is not None:
            return CommandReply(f"You already have a place called {name}.")
        last = await self.location.last_point(ctx.user_id)
        if last is None:
            return CommandReply(
                "I don't know where you are yet: send /location on and share your location "
                "first, then /place add again."
            )
        place = await self.location.add_place(ctx.user_id, name, last.lat, last.lon)
        tz = ZoneInfo(ctx.user.timezone)
        return CommandReply(
            f"Saved {place.name} where you were at {last.ts.astimezone(tz):%a %d %b %H:%M} "
            f"(within {place.radius_m:.0f} m)."
        )

    async def _change(
        self,
        ctx: CommandContext,
        name: str,
        *,
        new_name: str | None = None,
        kind: str | None = None,
        aliases: str | None = None,
    ) -> CommandReply:
        if new_name is not None and len(new_name) > MAX_NAME:
            return CommandReply(f"Keep place names under {MAX_NAME} characters.")
        if aliases is not None and len(", ".join(parse_aliases(aliases))) > MAX_ALIASES:
            return CommandReply(
                f"Keep a place's other names under {MAX_ALIASES} characters together."
            )
        place = await self._find(ctx, name.strip())
        if place is None:
            return CommandReply(f"You have no place called {name.strip()}.")
        if new_name is not None:
            other = await self._find(ctx, new_name)
            if other is not None and other.id != place.id:
                return CommandReply(f"You already have a place called {new_name}.")
            place.name = new_name
        if kind is not None:
            assert kind in KINDS
            place.kind = kind
        if aliases is not None:
            place.aliases = ", ".join(parse_aliases(aliases))
        await self.location.save_place(place)
        return CommandReply(f"Saved: {_line(place)}")


MAX_NAME = 60
"""The longest place name (characters), added or renamed: refused beyond it, never cut."""
MAX_ALIASES = 200
"""The longest list of a place's other names, as stored ("work, office")."""


def _line(p: Place) -> str:
    extra = {"home": " (home-like)", "ignored": " (ignored)"}.get(p.kind, "")
    aka = f", also {p.aliases}" if p.aliases else ""
    return f"{p.name}{extra}{aka}"


def _local_midnight(day: date, tz: ZoneInfo) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=tz)
