"""Tools: the current time and the user's time zone."""

from __future__ import annotations

from pydantic import BaseModel, Field

from bot.agent.tools.base import Tool, ToolContext
from bot.clock import is_zone_name
from bot.errors import ToolError
from storage.repos.users import UserRepo


class NoArgs(BaseModel):
    """This tool takes no arguments."""


class SetTimezoneArgs(BaseModel):
    """Arguments of set_timezone."""

    timezone: str = Field(description="IANA time zone name, e.g. Europe/Lisbon")


def valid_timezone(name: str) -> str:
    """Return the zone name if it is a real IANA zone, else raise ToolError."""
    if not is_zone_name(name):
        raise ToolError(f"{name[:64]!r} is not an IANA time zone; use a name like Europe/Lisbon")
    return name


async def current_time(ctx: ToolContext, _args: NoArgs) -> str:
    """The current date and time in the user's zone."""
    local = ctx.local_now
    return f"{local:%A %Y-%m-%d %H:%M} ({ctx.timezone})"


async def set_timezone(ctx: ToolContext, args: SetTimezoneArgs) -> str:
    """Set the user's time zone."""
    tz = valid_timezone(args.timezone.strip())
    async with ctx.db.session() as s:
        await UserRepo(s).set_timezone(ctx.user_id, tz)
    ctx.timezone = tz
    return f"time zone set to {tz}; local time is now {ctx.local_now:%H:%M}"


TOOLS = [
    Tool(
        "current_time",
        "Get the current date and time in the user's time zone.",
        NoArgs,
        current_time,
        "Checking the time…",
        group="time",
    ),
    Tool(
        "set_timezone",
        "Set the user's IANA time zone when they tell you where they are.",
        SetTimezoneArgs,
        set_timezone,
        "Setting your time zone…",
        read_only=False,
        group="time",
    ),
]
