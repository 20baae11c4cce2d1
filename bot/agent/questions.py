"""Question types, and counts answered by a structured query instead of by the model.

A question is a fact ("when is my dentist appointment?"), a summary ("how was my week?"),
a browse ("what did I do in March?"), a compare ("did I run more in March or April?") or a
count ("how many times did I go running last month?"). Counts and compares are answered by
``count_times``: a query over the user's own lines (found by identity) and journal in a window
of local days that counts the days on which they say they did the activity (by meaning:
"went for a run" counts, "running late" and "skipped my run" do not) and cites every line.
The model reads the number; it never counts search hits.
"""

from __future__ import annotations

import enum
import re
from datetime import UTC, date, datetime, time, timedelta

from pydantic import BaseModel, Field

from bot.agent.activities import activity, did
from bot.agent.tools.base import Tool, ToolContext
from bot.errors import ToolError
from storage.models import MemoryItem
from storage.repos.memory_index import MemoryIndexRepo


class QuestionKind(enum.Enum):
    """What kind of answer a question wants."""

    FACT = "fact"
    SUMMARY = "summary"
    BROWSE = "browse"
    COMPARE = "compare"
    COUNT = "count"


_KINDS = [
    (QuestionKind.COUNT, r"\b(how many (times|days)|how often|number of times|count)\b"),
    (
        QuestionKind.COMPARE,
        r"\b(more|less|fewer) (often |times )?(than|in|last|this)\b|\bcompared? (to|with)\b|"
        r"\b(did i|have i) \w+ more\b",
    ),
    (QuestionKind.BROWSE, r"\bwhat did i do\b|\bwhat have i (been )?(doing|done)\b"),
    (QuestionKind.SUMMARY, r"\b(summari[sz]e|summary|recap|how was my|overview)\b"),
]


def question_kind(text: str) -> QuestionKind:
    """The kind of a question, by rules (a fact when nothing else fits)."""
    for kind, pattern in _KINDS:
        if re.search(pattern, text, re.IGNORECASE):
            return kind
    return QuestionKind.FACT


class CountArgs(BaseModel):
    """Arguments of count_times."""

    what: str = Field(min_length=1, max_length=60, description="The activity, e.g. 'run'")
    start: date = Field(description="First local day, YYYY-MM-DD")
    end: date = Field(description="Last local day (inclusive), YYYY-MM-DD")


MAX_ITEMS = 20_000
"""A window this full is cut (the answer says so); a person rarely writes this much."""
MAX_CITED = 200
"""Lines cited one by one; past this the answer says how many more were counted."""


async def count_times(ctx: ToolContext, args: CountArgs) -> str:
    """Count the local days in a window on which the user's own words say they did something.

    The user's own words, by identity: their chat messages and voice notes, device and
    pendant transcripts, imported lines under their own name, and their journal. A line
    counts when it means the activity ("went for a run"), not only when it shares its letters
    ("running late"), and is neither negated nor about someone else (``activities.did``).
    Every counted line is cited, so the user can check the count.
    """
    if args.end < args.start:
        raise ToolError("end is before start")
    act = activity(args.what)
    start = datetime.combine(args.start, time(0), ctx.tz).astimezone(UTC)
    end = datetime.combine(args.end + timedelta(days=1), time(0), ctx.tz).astimezone(UTC)
    async with ctx.db.session() as s:
        items = await MemoryIndexRepo(s).own_lines(ctx.user_id, start, end, MAX_ITEMS)
    days: dict[date, list[MemoryItem]] = {}
    for item in items:
        if did(act, item.text):
            days.setdefault(item.ts.astimezone(ctx.tz).date(), []).append(item)
    span = f"{args.start:%d %B %Y} to {args.end:%d %B %Y}"
    if not days:
        return f"0 days from {span} on which the user's own words say they did {args.what!r}."
    lines_total = sum(len(v) for v in days.values())
    lines = [
        f"{len(days)} {'day' if len(days) == 1 else 'days'} from {span} on which the user's "
        f"own words say they did {args.what!r} ({lines_total} "
        f"{'line' if lines_total == 1 else 'lines'}; a structured count: cite every line "
        "of a day you mention):"
    ]
    cited = 0
    for day, said in sorted(days.items()):
        for item in said:
            if cited == MAX_CITED:
                break
            cited += 1
            lines.append(f"[{ctx.sources.add(item)}] {day:%a %d %b}: {item.text[:120]}")
    if cited < lines_total:
        lines.append(f"({lines_total - cited} more counted lines are not listed)")
    if len(items) >= MAX_ITEMS:
        lines.append("(the window holds more items than were read; the count may be low)")
    return "\n".join(lines)


COUNT_TOOL = Tool(
    "count_times",
    "Count the days in a date range on which the user did something, from their own "
    "messages and journal. Use it for 'how many times', 'how often' and comparisons (one "
    "call per period); never count search results yourself.",
    CountArgs,
    count_times,
    "Counting…",
    untrusted_output=True,  # it quotes the user's stored words
    group="count",
)
"""The structured count behind count and compare questions."""
