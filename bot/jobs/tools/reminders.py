"""Tools: set, list and cancel reminders (the time is read by the deterministic parser)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from bot.agent.rules import broken_rule
from bot.agent.tools.base import Tool, ToolContext
from bot.clock import zone
from bot.errors import ToolError
from bot.jobs.localtime import day_first
from bot.jobs.reminders.phrases import PhraseError, TooManyReminders, parse_reminder
from bot.jobs.reminders.service import Reminders
from storage.repos.users import UserRepo


class SetReminderArgs(BaseModel):
    """Arguments of set_reminder."""

    request: str = Field(
        min_length=3,
        max_length=500,
        description="The user's own words, e.g. 'at 5pm to call mom' or 'every Monday at 9 "
        "to send the report'. Do not convert times yourself.",
    )
    place: str | None = Field(
        None, max_length=120, description="The place it is about, if the user named one"
    )
    people: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="People it is about or with, full names as resolved (e.g. 'Ana Silva')",
    )


class NoArgs(BaseModel):
    """This tool takes no arguments."""


class CancelReminderArgs(BaseModel):
    """Arguments of cancel_reminder."""

    reminder_id: int = Field(description="The id shown by list_reminders")


async def reminder_rules_guard(ctx: ToolContext, tool: Tool, args: Any) -> str | None:
    """Refuse a set_reminder call whose time breaks one of the user's time rules.

    The time is read by the same deterministic parser the tool uses; words it cannot read
    pass (the tool itself then asks the user when).
    """
    if tool.name != "set_reminder" or not isinstance(args, SetReminderArgs):
        return None
    async with ctx.db.session() as s:
        user = await UserRepo(s).get(ctx.user_id)
    if user is None:
        return None
    tz = zone(user.timezone)
    try:
        parsed = parse_reminder(
            args.request, ctx.now, tz, day_first=day_first(user.date_order, user.timezone)
        )
    except PhraseError:
        return None
    return await broken_rule(ctx, parsed.first_at.astimezone(tz), reminders=True)


async def set_reminder(ctx: ToolContext, args: SetReminderArgs) -> str:
    """Parse and store a reminder in the user's zone; returns the confirmation to repeat."""
    async with ctx.db.session() as s:
        user = await UserRepo(s).get(ctx.user_id)
    if user is None:
        raise ToolError("the user was not found")
    try:
        created = await Reminders(ctx.db).create(
            user, args.request, ctx.now, place=args.place, people=args.people
        )
    except TooManyReminders as exc:
        raise ToolError(f"{exc} Tell the user this; do not ask for another time.") from exc
    except PhraseError as exc:
        raise ToolError(f"{exc}; ask the user when") from exc
    return f"{created.text} (reminder #{created.reminder.id}). Tell the user exactly this."


async def list_reminders(ctx: ToolContext, _args: NoArgs) -> str:
    """The user's active reminders."""
    async with ctx.db.session() as s:
        user = await UserRepo(s).get(ctx.user_id)
    if user is None:
        raise ToolError("the user was not found")
    return await Reminders(ctx.db).listing(user, ctx.now)


async def cancel_reminder(ctx: ToolContext, args: CancelReminderArgs) -> str:
    """Cancel one of the user's reminders."""
    gone = await Reminders(ctx.db).cancel(ctx.user_id, args.reminder_id)
    if gone is None:
        raise ToolError(f"there is no active reminder #{args.reminder_id}; call list_reminders")
    return f"cancelled reminder #{gone.id}: {gone.text or 'reminder'}"


TOOLS = [
    Tool(
        "set_reminder",
        "Set a reminder from the user's words (time and what). Pass their words verbatim.",
        SetReminderArgs,
        set_reminder,
        "Setting a reminder…",
        read_only=False,
        group="reminders",
    ),
    Tool(
        "list_reminders",
        "List the user's reminders.",
        NoArgs,
        list_reminders,
        "Checking reminders…",
        group="reminders",
    ),
    Tool(
        "cancel_reminder",
        "Cancel a reminder by id.",
        CancelReminderArgs,
        cancel_reminder,
        "Cancelling the reminder…",
        read_only=False,
        group="reminders",
    ),
]
