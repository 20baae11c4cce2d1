"""The chat side of the journal: /journal, "journal: ..." messages and voice notes.

A typed message starting with "journal:" and a voice note whose transcript starts with the
word "journal" are journal entries, exactly like ``/journal TEXT``; nothing reaches the LLM.
"""

from __future__ import annotations

import re

from bot.agent.journal.analytics import Metric
from bot.agent.journal.service import JournalService
from bot.agent.journal.tools import impossible_day, period_days
from bot.chat import CommandContext, CommandReply, CommandTable, row_id
from bot.clock import Clock, parse_hhmm, zone
from bot.errors import ToolError
from bot.messages import InboundMessage

_TYPED = re.compile(r"^\s*journal\s*:\s*(?P<rest>\S.*)$", re.IGNORECASE | re.DOTALL)
_SPOKEN = re.compile(r"^\s*journal\b[\s,.:;!-]*(?P<rest>\S.*)$", re.IGNORECASE | re.DOTALL)
_MARK = re.compile(
    r"^\s*(?:(?:that|this)(?:'s|\s+is|\s+was)\s+(?:a\s+)?journal\s+entry"
    r"|(?:mark|save|add|keep)\s+(?:that|this)\s+(?:as\s+a\s+journal\s+entry"
    r"|(?:to|in)\s+(?:my\s+)?journal))[\s.!]*$",
    re.IGNORECASE,
)
_SHOW = re.compile(
    r"^\s*(?:(?:can|could|would)\s+you\s+)?(?:please\s+)?(?:show|chart|plot|graph|draw)"
    r"(?:\s+me)?\s+(?:a\s+(?:chart|graph)\s+of\s+)?"
    r"my\s+(?P<metric>stress|happiness|mood|energy)\b(?P<rest>[^?]*)\??\s*$",
    re.IGNORECASE,
)
METRIC_WORDS: dict[str, Metric] = {
    "stress": "stress",
    "happiness": "happiness",
    "mood": "happiness",
    "energy": "energy",
}
CHART_DAYS = 30
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
SHORT_DAYS = [d[:3] for d in DAYS]
USAGE = (
    "Write a journal entry with /journal how your day went (or start a message with "
    '"journal:", or a voice note with the word "journal"). /journal alone (or "that\'s a '
    'journal entry") adds your previous message; reply /journal to a message to add that one. '
    "Fix one with /journal edit ID text."
)


def _hhmm(word: str) -> str | None:
    """A time like 19:00, 1930, 19 or 7pm as HH:MM; None when the word is not a time."""
    try:
        at = parse_hhmm(word)
    except ValueError:
        return None
    return f"{at.hour:02d}:{at.minute:02d}"


_SPACED_AM_PM = re.compile(r"(\d)\s+([ap]\.?m\.?)(?!\w)", re.IGNORECASE)
""""7 pm" as one word, "7pm", so the words of a command can be read one by one."""


def journal_trigger(msg: InboundMessage) -> str | None:
    """A typed "journal: ..." or a voice note starting with "journal", as a /journal line."""
    if msg.callback_data is not None:
        return None
    if _MARK.match(msg.text):
        return "/journal"
    spoken = any(a.kind in ("voice", "audio") for a in msg.attachments)
    m = (_SPOKEN if spoken else _TYPED).match(msg.text)
    if m is None:
        return None
    return f"/journal {m.group('rest').strip()}"


CHART_EXAMPLES = (
    "for example /chart stress this month, /chart stress last 30 days or "
    "/chart stress 2024-03-01 to 2024-03-31"
)
"""Periods /chart reads, shown when it cannot read the one asked for."""


def chart_trigger(msg: InboundMessage) -> str | None:
    """A request like "show my stress this month" (typed or said) as a /chart line."""
    if msg.callback_data is not None:
        return None
    m = _SHOW.match(msg.text)
    if m is None:
        return None
    return f"/chart {m.group('metric').lower()} {m.group('rest').strip()}".strip()


def _scores_line(happiness: float | None, stress: float | None, energy: float | None) -> str:
    def fmt(v: float | None) -> str:
        return "?" if v is None else f"{v:.0f}"

    return f"happiness {fmt(happiness)}, stress {fmt(stress)}, energy {fmt(energy)} (of 100)"


def _is_mark(text: str) -> bool:
    """A bare /journal (/journal@bot on Telegram) or "that's a journal entry"."""
    return text.strip().lower().partition("@")[0] == "/journal" or bool(_MARK.match(text))


async def _mark(journal: JournalService, ctx: CommandContext) -> CommandReply:
    """/journal alone: add the replied-to message, or the previous one, to the journal."""
    msg = ctx.msg
    # Telegram names the message a reply answers; Slack's reply_to is the message itself.
    if msg.reply_to and msg.reply_to != msg.message_id:
        a = msg.address
        target = await journal.message(
            ctx.user_id, f"{a.channel}:{a.account}:{a.chat_id}:{msg.reply_to}"
        )
        if target is None:
            return CommandReply(
                "I can only add your own messages to your journal, and I don't have that "
                "one. Reply /journal to a message you sent me, or write /journal TEXT."
            )
    else:
        target = await journal.previous_message(ctx.user_id, ctx.conversation_id, msg.dedupe_key)
        # A second "/journal" (or "that's a journal entry") means the same message again.
        for _ in range(5):
            if target is None or target.dedupe_key is None or not _is_mark(target.text):
                break
            target = await journal.previous_message(
                ctx.user_id, ctx.conversation_id, target.dedupe_key
            )
        if target is None:
            return CommandReply(USAGE)
    existing = await journal.entry_of(ctx.user_id, target)
    if existing is None and (target.text.startswith("/") or not target.text.strip()):
        return CommandReply(
            "That message is a command, not something to keep. Write "
            "/journal TEXT, or reply /journal to the message you mean."
        )
    entry, status = await journal.mark(ctx.user_id, target, timezone=ctx.user.timezone)
    said = f"your message of {entry.day:%a %d %b}"
    head = (
        f"Added {said} to your journal"
        if status != "same"
        else f"{said.capitalize()} is already in your journal"
    )
    return CommandReply(
        f"{head} (#{entry.id}): {_scores_line(entry.happiness, entry.stress, entry.energy)}."
    )


def register_journal_commands(
    commands: CommandTable, journal: JournalService, clock: Clock
) -> None:
    """Add /journal, /chart and their plain-words triggers to the command table."""

    async def chart_cmd(ctx: CommandContext) -> CommandReply:
        word, _, when = ctx.args.strip().partition(" ")
        metric = METRIC_WORDS.get(word.lower())
        if metric is None:
            return CommandReply(
                "Usage: /chart stress|happiness|energy [period], e.g. /chart stress this month"
            )
        tz = zone(ctx.user.timezone)
        when = when.strip()
        if (bad := impossible_day(when)) is not None:
            return CommandReply(f"{bad} is not a day on the calendar; {CHART_EXAMPLES}.")
        try:
            first, last, label = period_days(clock.now(), tz, None, None, when or None, CHART_DAYS)
        except ToolError:
            return CommandReply(
                f"I can't chart {when!r}: name days that have passed, {CHART_EXAMPLES}."
            )
        if not when:
            label = f"last {CHART_DAYS} days"
        words, image = await journal.chart(ctx.user_id, metric, first, last, label)
        return CommandReply(words, image=image)

    async def journal_cmd(ctx: CommandContext) -> CommandReply:
        args = ctx.args.strip()
        if not args:
            return await _mark(journal, ctx)
        head, _, rest = args.partition(" ")
        if head.lower() == "edit":
            return await _edit(ctx, rest)
        if head.lower() == "review" and len(_SPACED_AM_PM.sub(r"\1\2", rest).split()) <= 3:
            return await _review(ctx, rest)
        spoken = any(a.kind in ("voice", "audio") for a in ctx.msg.attachments)
        entry, status = await journal.write(
            ctx.user_id,
            args,
            timezone=ctx.user.timezone,
            ref=f"msg:{ctx.msg.dedupe_key}",
            source="voice" if spoken else "chat",
            written_at=ctx.msg.received_at,
            dedupe_key=ctx.msg.dedupe_key,
        )
        verb = "Saved" if status == "added" else "Already saved"
        return CommandReply(
            f"{verb} to your journal for {entry.day:%a %d %b} (#{entry.id}): "
            f"{_scores_line(entry.happiness, entry.stress, entry.energy)}."
        )

    async def _review(ctx: CommandContext, rest: str) -> CommandReply:
        words = rest.lower().split()
        if not words:
            row = await journal.review_settings(ctx.user_id)
            state = "on" if row.weekly_review else "off"
            return CommandReply(
                f"Your weekly journal review is {state} ({DAYS[row.review_weekday].capitalize()} "
                f"{row.review_time}). /journal review on [day] [HH:MM] or /journal review off."
            )
        if words[0] == "off":
            await journal.set_review(ctx.user_id, on=False)
            return CommandReply("Weekly journal review turned off.")
        if words[0] != "on":
            return CommandReply("Usage: /journal review on [day] [HH:MM], or /journal review off")
        weekday: int | None = None
        at: str | None = None
        for w in _SPACED_AM_PM.sub(r"\1\2", " ".join(words[1:])).split():
            if w[:3] in SHORT_DAYS and w.isalpha():
                weekday = SHORT_DAYS.index(w[:3])
                continue
            at = _hhmm(w)
            if at is None:
                return CommandReply(f"{w!r} is neither a weekday nor a time like 19:00.")
        row = await journal.set_review(ctx.user_id, on=True, weekday=weekday, at=at)
        return CommandReply(
            f"Weekly journal review on: {DAYS[row.review_weekday].capitalize()}s at "
            f"{row.review_time} your time (held back during your quiet hours; skipped in weeks "
            "with fewer than three entries)."
        )

    async def _edit(ctx: CommandContext, rest: str) -> CommandReply:
        num, _, text = rest.strip().partition(" ")
        ident = row_id(num)
        if ident is None or not text.strip():
            return CommandReply("Usage: /journal edit ID new text")
        entry = await journal.edit(ctx.user_id, ident, text)
        if entry is None:
            return CommandReply(f"You have no journal entry #{ident}.")
        return CommandReply(
            f"Updated entry #{entry.id} ({entry.day:%a %d %b}) and scored it again: "
            f"{_scores_line(entry.happiness, entry.stress, entry.energy)}."
        )

    commands.register("journal", journal_cmd, "write in your journal (/journal how today went)")
    commands.register("chart", chart_cmd, "chart a journal metric (/chart stress this month)")
    commands.add_trigger(journal_trigger)
    commands.add_trigger(chart_trigger)
