"""Hard rules and soft facts: a rule the user states is kept apart and checked by code.

"never book meetings before 10" or "I don't eat pork" is stored as a fact in the ``rule``
category. Rules are always in the prompt (soft facts may be cut), listed apart in /facts,
and where a tool proposes a time the controller checks the time rules itself, before the
call runs: the model cannot talk its way past them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from bot.agent.tools.base import Tool, ToolContext
from storage.repos.facts import FactRepo

RULE_CATEGORY = "rule"
"""The fact category of hard rules."""

_RULE = re.compile(
    r"^\s*(please\s+)?(i\s+)?(never|always|don't ever|do not ever|must not|mustn't|"
    r"don't (book|schedule|eat|drink|put|plan|set)|do not (book|schedule|eat|drink|put|plan|set)|"
    r"no (meetings|events|calls|appointments)\b)",
    re.IGNORECASE,
)
_TIME_RULE = re.compile(
    r"\b(?P<dir>before|earlier than|after|later than)\s+(?P<h>\d{1,2})(?::(?P<m>\d{2}))?"
    r"\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)?",
    re.IGNORECASE,
)
_EVENTS = re.compile(
    r"\b(meetings?|events?|calls?|appointments?|book|schedule|anything)\b", re.IGNORECASE
)
_REMINDERS = re.compile(
    r"\b(reminders?|remind|ping|pings|notifications?|notify|nudges?|anything)\b", re.IGNORECASE
)
"""Words that make a time rule apply to reminders ("no reminders after 9pm")."""

EVENT_GROUPS = frozenset({"calendar"})
"""Tool groups whose proposed times the time rules apply to."""


def is_rule(text: str) -> bool:
    """The user stated a rule ("never ...", "always ...", "I don't eat ..."), not a fact."""
    return bool(_RULE.match(text))


@dataclass(frozen=True, slots=True)
class TimeRule:
    """A rule about when events may be: nothing before (or after) a time of day."""

    text: str
    """The rule as the user said it."""
    not_before: time | None = None
    not_after: time | None = None

    def breaks(self, start: time) -> bool:
        """True when an event starting at ``start`` (local) breaks this rule."""
        if self.not_before is not None and start < self.not_before:
            return True
        return self.not_after is not None and start > self.not_after


def time_rule(text: str, *, reminders: bool = False) -> TimeRule | None:
    """The time rule in a rule's text about events (or about reminders), or None."""
    m = _TIME_RULE.search(text)
    about = _REMINDERS if reminders else _EVENTS
    if m is None or not about.search(text) or not is_rule(text):
        return None
    hour, minute = int(m.group("h")), int(m.group("m") or 0)
    ampm = (m.group("ampm") or "").lower().replace(".", "")
    if ampm == "pm" and hour < 12:
        hour += 12
    if ampm == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    at = time(hour, minute)
    if m.group("dir").lower() in ("before", "earlier than"):
        return TimeRule(text, not_before=at)
    return TimeRule(text, not_after=at)


def _proposed_start(ctx: ToolContext, args: Any) -> datetime | None:
    """The local start a call proposes (its ``start`` field), if it has one."""
    start = getattr(args, "start", None)
    if not isinstance(start, datetime):
        return None
    return start.astimezone(ctx.tz) if start.tzinfo else start


async def rules_guard(ctx: ToolContext, tool: Tool, args: Any) -> str | None:
    """Refuse an event-proposing call whose time breaks one of the user's rules."""
    if tool.group not in EVENT_GROUPS:
        return None
    start = _proposed_start(ctx, args)
    if start is None:
        return None
    return await broken_rule(ctx, start)


async def broken_rule(ctx: ToolContext, start: datetime, *, reminders: bool = False) -> str | None:
    """Why ``start`` (local) breaks one of the user's time rules, or None when none applies."""
    async with ctx.db.session() as s:
        rules = await FactRepo(s).active(ctx.user_id, RULE_CATEGORY)
    what = "set this reminder" if reminders else "book it"
    for fact in rules:
        rule = time_rule(fact.text, reminders=reminders)
        if rule is not None and rule.breaks(start.time()):
            return (
                f'{start:%H:%M} breaks the user\'s rule "{fact.text}". Do not {what}; tell '
                "the user, and offer a time the rule allows."
            )
    return None
