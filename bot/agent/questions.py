"""Question types, and counts answered by a structured query instead of by the model.

A question is a fact ("when is my dentist appointment?"), a summary ("how was my week?"),
a browse ("what did I do in March?"), a compare ("did I run more in March or April?") or a
count ("how many times did I go running last month?"). Counts and compares are answered by
``count_times``: a query over the user's own messages and journal in a window of local days
that counts the days the activity is mentioned (negated mentions such as "skipped my run"
left out) and numbers those days as sources. The model reads the number; it never counts
search hits.
"""

from __future__ import annotations

import enum
import re
from datetime import UTC, date, datetime, time, timedelta

from pydantic import BaseModel, Field

from bot.agent.tools.base import Tool, ToolContext
from bot.errors import ToolError
from storage.models import MemoryItem
from storage.repos.memory_index import OWN_SPEAKERS, MemoryIndexRepo


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


_IRREGULAR = {
    "run": ("ran",),
    "swim": ("swam", "swum"),
    "go": ("went", "gone"),
    "eat": ("ate", "eaten"),
    "ride": ("rode",),
    "drink": ("drank",),
    "see": ("saw", "seen"),
    "meet": ("met",),
    "buy": ("bought",),
    "sleep": ("slept",),
    "write": ("wrote",),
    "read": ("read",),
}
_NEGATION = re.compile(
    r"\b(didn't|did not|no|not|never|skipped|skip|missed|without)\W+(\w+\W+){0,2}$",
    re.IGNORECASE,
)


def activity_pattern(what: str) -> re.Pattern[str]:
    """Words for an activity: "run" finds run, runs, running, ran (not "brunch")."""
    words = [w for w in re.findall(r"[a-z]+", what.lower()) if len(w) > 1]
    if not words:
        raise ToolError("say what to count, e.g. 'run' or 'gym'")
    forms: list[str] = []
    for w in words:
        stem = w.removesuffix("e")
        forms.append(rf"{re.escape(stem)}\w*")
        forms += [re.escape(f) for f in _IRREGULAR.get(w, ())]
    return re.compile(rf"\b({'|'.join(forms)})\b", re.IGNORECASE)


def mentions(pattern: re.Pattern[str], text: str) -> bool:
    """The activity is mentioned, and not as something that did not happen."""
    return any(not _NEGATION.search(text[: m.start()]) for m in pattern.finditer(text))


class CountArgs(BaseModel):
    """Arguments of count_times."""

    what: str = Field(min_length=1, max_length=60, description="The activity, e.g. 'run'")
    start: date = Field(description="First local day, YYYY-MM-DD")
    end: date = Field(description="Last local day (inclusive), YYYY-MM-DD")


MAX_ITEMS = 20_000
"""A window this full is cut (the answer says so); a person rarely writes this much."""
MAX_LISTED = 31


async def count_times(ctx: ToolContext, args: CountArgs) -> str:
    """Count the local days in a window on which the user's own words mention an activity."""
    if args.end < args.start:
        raise ToolError("end is before start")
    pattern = activity_pattern(args.what)
    start = datetime.combine(args.start, time(0), ctx.tz).astimezone(UTC)
    end = datetime.combine(args.end + timedelta(days=1), time(0), ctx.tz).astimezone(UTC)
    async with ctx.db.session() as s:
        items = await MemoryIndexRepo(s).in_window(
            ctx.user_id, start, end, ("message", "journal"), MAX_ITEMS
        )
    days: dict[date, MemoryItem] = {}
    for item in items:
        own = item.kind == "journal" or item.speaker.lower() in OWN_SPEAKERS
        if own and mentions(pattern, item.text):
            days.setdefault(item.ts.astimezone(ctx.tz).date(), item)
    span = f"{args.start:%d %B %Y} to {args.end:%d %B %Y}"
    if not days:
        return f"0 days from {span} on which the user's own words mention {args.what!r}."
    lines = [
        f"{len(days)} {'day' if len(days) == 1 else 'days'} from {span} on which the user's "
        f"own words mention {args.what!r} (a structured count; cite the days):"
    ]
    for day, item in sorted(days.items())[:MAX_LISTED]:
        lines.append(f"[{ctx.sources.add(item)}] {day:%a %d %b}: {item.text[:120]}")
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
