"""Tools: read and change lifebot's calendar."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from pydantic import BaseModel, Field

from bot.agent.tools.base import Tool, ToolContext
from bot.errors import ToolError
from bot.jobs.calendars.events import event_line
from bot.jobs.localtime import local_day_bounds
from storage.repos.calendar import CalendarRepo


class ListEventsArgs(BaseModel):
    """Arguments of list_events."""

    start_date: date | None = Field(None, description="First local day (YYYY-MM-DD); default today")
    days: int = Field(7, ge=1, le=62, description="How many days from start_date")


class AddEventArgs(BaseModel):
    """Arguments of add_event."""

    title: str = Field(min_length=1, max_length=120)
    start: datetime = Field(description="Local start, ISO 8601 (YYYY-MM-DDTHH:MM)")
    end: datetime | None = Field(None, description="Local end; default one hour after start")
    place: str | None = Field(None, max_length=120)
    people: list[str] = Field(default_factory=list, max_length=10)


class CancelEventArgs(BaseModel):
    """Arguments of cancel_event."""

    event_id: int


async def list_events(ctx: ToolContext, args: ListEventsArgs) -> str:
    """The user's events in a range of local days."""
    first = args.start_date or ctx.local_now.date()
    start, _ = local_day_bounds(first, ctx.tz)
    _, end = local_day_bounds(first + timedelta(days=args.days - 1), ctx.tz)
    async with ctx.db.session() as s:
        events = await CalendarRepo(s).events_between(ctx.user_id, start, end)
    if not events:
        return f"no events from {first:%a %d %b} for {args.days} day(s)"
    return "\n".join(event_line(e, ctx.tz) for e in events)


async def add_event(ctx: ToolContext, args: AddEventArgs) -> str:
    """Add an event, merging with the same title within an hour."""
    start = args.start if args.start.tzinfo else args.start.replace(tzinfo=ctx.tz)
    end = args.end or start + timedelta(hours=1)
    end = end if end.tzinfo else end.replace(tzinfo=ctx.tz)
    if end < start:
        raise ToolError("the end is before the start")
    async with ctx.db.session() as s:
        event, merged = await CalendarRepo(s).add_or_merge(
            ctx.user_id,
            title=args.title,
            start=start,
            end=end,
            place=args.place,
            people=args.people,
            source="agent",
            now=ctx.now,
        )
    verb = "merged into the existing event" if merged else "added"
    return f"{verb}: {event_line(event, ctx.tz)}"


async def cancel_event(ctx: ToolContext, args: CancelEventArgs) -> str:
    """Cancel one of the user's events."""
    async with ctx.db.session() as s:
        event = await CalendarRepo(s).cancel_event(ctx.user_id, args.event_id, ctx.now)
    if event is None:
        raise ToolError(f"there is no event #{args.event_id}; call list_events")
    return f"cancelled: {event_line(event, ctx.tz)}"


TOOLS = [
    Tool(
        "list_events",
        "List the user's calendar events.",
        ListEventsArgs,
        list_events,
        "Checking your calendar…",
        untrusted_output=True,  # events may come from proposals drawn from transcripts
        group="calendar",
    ),
    Tool(
        "add_event",
        "Add an event to the user's calendar when they ask.",
        AddEventArgs,
        add_event,
        "Adding to your calendar…",
        read_only=False,
        group="calendar",
    ),
    Tool(
        "cancel_event",
        "Cancel a calendar event by id.",
        CancelEventArgs,
        cancel_event,
        "Cancelling the event…",
        read_only=False,
        group="calendar",
    ),
]
