"""Agent tools (read-only): "where was I ..." and "when did I last go to ...", citing stays.

Times are read with the same hard windows as memory search (``timeparse``); a clock time in the
question ("at 3 pm") narrows the day to the stays around that moment.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from bot.agent.retrieval.timeparse import parse_time
from bot.agent.tools.base import Tool, ToolContext
from bot.errors import ToolError
from bot.location.places import find_by_name
from bot.location.service import LocationService, StayView, named
from storage.models import MemoryItem

_CLOCK = re.compile(
    r"\b(?:at|around|about)?\s*(\d{1,2})(?:[:.](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.|h)?\b",
    re.IGNORECASE,
)
AROUND = timedelta(minutes=90)
"""With a clock time, stays this close to it are shown."""


class WhereArgs(BaseModel):
    """Arguments of where_was_i."""

    when: str = Field(
        min_length=1,
        max_length=120,
        description="The time in the user's words: 'Tuesday at 3 pm', 'yesterday afternoon'",
    )


class LastVisitArgs(BaseModel):
    """Arguments of last_visit."""

    place: str = Field(min_length=1, max_length=60, description="A place name: 'gym', 'office'")


def _clock_time(rest: str) -> tuple[int, int] | None:
    for m in _CLOCK.finditer(rest):
        hour, minute, half = int(m.group(1)), int(m.group(2) or 0), (m.group(3) or "").lower()
        if not half and m.group(2) is None:
            continue  # a bare number is not a time
        if half.startswith("p") and hour < 12:
            hour += 12
        if half.startswith("a") and hour == 12:
            hour = 0
        if hour < 24 and minute < 60:
            return hour, minute
    return None


def _cite(ctx: ToolContext, view: StayView) -> str:
    st = view.stay
    assert st.id is not None
    tz = ctx.tz
    where = view.place.name if view.place else "an unnamed place"
    if view.place is None and view.area:
        where += f" near {view.area}"
    span = f"{st.start.astimezone(tz):%a %d %b %H:%M}-{st.end.astimezone(tz):%H:%M}"
    if st.end.astimezone(tz).date() != st.start.astimezone(tz).date():
        span = f"{st.start.astimezone(tz):%a %d %b %H:%M} - {st.end.astimezone(tz):%a %d %b %H:%M}"
    text = f"At {where}, {span}"
    n = ctx.sources.add(
        MemoryItem(
            user_id=ctx.user_id, kind="stay", source_id=st.id, ts=st.start, ts_end=st.end, text=text
        )
    )
    return f"[{n}] {text}"


def location_tools(location: LocationService) -> list[Tool]:
    """The read-only location tools over ``location``."""

    async def where_was_i(ctx: ToolContext, args: WhereArgs) -> str:
        parsed = parse_time(args.when, ctx.now, ctx.tz)
        if parsed.window is None:
            raise ToolError(
                f"cannot pin down {parsed.unresolved or args.when!r}; ask for a day or date"
            )
        start, end = parsed.window.start, parsed.window.end
        at = _clock_time(parsed.rest)
        moment: datetime | None = None
        if at is not None:
            local = start.astimezone(ctx.tz)
            moment = local.replace(hour=at[0], minute=at[1]).astimezone(start.tzinfo)
            start, end = moment - AROUND, moment + AROUND
        views = await location.stays(ctx.user_id, start, end)
        label = parsed.window.describe(ctx.tz)
        if not views:
            return (
                f"No stays are recorded for {label}"
                + (f" around {at[0]:02d}:{at[1]:02d}" if at else "")
                + ". Say so; do not guess (location may have been off or the phone silent)."
            )
        if moment is not None:
            inside = [v for v in views if v.stay.start <= moment <= v.stay.end]
            head = (
                "At that moment: " + _cite(ctx, inside[0])
                if inside
                else "No stay covers that exact moment (the person was probably on the move)."
            )
            rest = [_cite(ctx, v) for v in views if not inside or v is not inside[0]]
            return head + ("\nNearby: " + "; ".join(rest) if rest else "")
        return f"Stays in {label}:\n" + "\n".join(_cite(ctx, v) for v in views)

    async def last_visit(ctx: ToolContext, args: LastVisitArgs) -> str:
        places = await location.places(ctx.user_id)
        place = find_by_name(args.place, [named(p) for p in places])
        if place is None:
            names = ", ".join(p.name for p in places) or "none yet"
            return f"No place is called {args.place!r}. Known places: {names}."
        views = await location.stays_at(ctx.user_id, place.id, before=ctx.now)
        if not views:
            return f"No stays at {place.name} are recorded."
        return f"Latest stays at {place.name}, newest first:\n" + "\n".join(
            _cite(ctx, v) for v in views
        )

    return [
        Tool(
            "where_was_i",
            "Where the user was at a time, from their location history (stays). Pass their "
            "words for the time. Cite the [n] stays you use.",
            WhereArgs,
            where_was_i,
            "Looking at where you were…",
            group="location",
        ),
        Tool(
            "last_visit",
            "When the user was last at a named place (gym, office, ...), from their stays. "
            "Cite the [n] stays you use.",
            LastVisitArgs,
            last_visit,
            "Looking at your visits…",
            group="location",
        ),
    ]
