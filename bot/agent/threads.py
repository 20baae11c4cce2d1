"""Threads: each conversation's title and the short account of its older turns.

A conversation is one chat, Slack thread or Telegram topic (its address); ``/new`` starts a
fresh one in the same chat. The model sees the thread's recent messages as they were and
everything older (back to the latest ``/new``) as a running summary, so a long thread loses
no topic when it outgrows the history window. Titles and summaries come from the fast model
when ``LIFEBOT_THREADS_WITH_MODEL`` is on, else from the user's own words (no model call).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.agent.llm import LLM
from bot.errors import AgentError
from storage.db import Database
from storage.models import Message
from storage.repos.messages import ConversationRepo, HistoryRow, ThreadState

log = logging.getLogger(__name__)

TITLE_WORDS = 6
"""A plain title is the first this many words of the thread's first message."""
TITLE_CHARS = 60
SUMMARY_CHARS = 2400
"""The running summary is kept under this size (its oldest lines go first)."""
LINE_CHARS = 160
"""Each message contributes at most this much to a plain summary."""
SUMMARY_BATCH = 6
"""Rows that left the history window are folded into the stored summary once there are this
many (one fast-model call and one write every few turns, not one per message); until then the
model is shown them as plain lines after the summary."""

TITLE_PROMPT = (
    "Name this conversation in at most six words, from the user's first message. "
    "Reply with the title only: no quotes, no full stop."
)
SUMMARY_PROMPT = (
    "You keep a short running summary of a conversation between a user and their assistant. "
    "Given the summary so far and the newer messages, reply with the updated summary: a few "
    "plain lines with the topics, facts the user stated, decisions and open questions. "
    f"At most {SUMMARY_CHARS // 2} characters. Reply with the summary only."
)


@dataclass(slots=True)
class ThreadView:
    """What the model is given of a thread: the recent rows and a summary of the rest."""

    recent: Sequence[HistoryRow]
    """The newest rows (the history window), oldest first."""
    summary: str | None
    """The older rows in short (None when nothing older is left out)."""
    parent: Message | None = None
    """The message the thread hangs from (a Slack thread's first message), if stored."""
    save: ThreadSave | None = None
    """The title and summary to store with the turn (None: nothing changed)."""


@dataclass(slots=True)
class ThreadSave:
    """A thread's new title and running summary, written in the turn's own commit."""

    user_id: int
    """Whose conversation it is."""
    conversation_id: int
    """The conversation (thread) they belong to."""
    title: str | None
    """The thread's title."""
    summary: str | None
    """The running summary of the rows older than the history window."""
    through: int | None
    """The id of the newest row the summary covers."""

    async def write(self, s: AsyncSession) -> None:
        """Store them (one UPDATE) in the caller's unit of work."""
        await ConversationRepo(s).save_thread(
            self.user_id,
            self.conversation_id,
            title=self.title,
            summary=self.summary,
            summary_through=self.through,
        )


def plain_title(text: str) -> str:
    """A title from the first words of ``text`` (commands and links left out)."""
    words = [w for w in text.split() if not w.startswith(("/", "http://", "https://"))]
    title = " ".join(words[:TITLE_WORDS]).strip(" .,:;!?-")
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 1].rstrip() + "…"
    return title or "Untitled"


def _first_sentence(text: str) -> str:
    """The first sentence (or line) of ``text``, cut to ``LINE_CHARS``."""
    flat = " ".join(text.split())
    head = re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]
    return head if len(head) <= LINE_CHARS else head[: LINE_CHARS - 1].rstrip() + "…"


def plain_extract(rows: Sequence[HistoryRow]) -> str:
    """The older rows as lines: what the user said and the first sentence of each answer."""
    lines = []
    for row in rows:
        if row.role not in ("user", "assistant") or not row.text.strip():
            continue
        who = "User" if row.role == "user" else "You"
        lines.append(f"- {who}: {_first_sentence(row.text)}")
    return "\n".join(lines)


def keep_tail(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` without its oldest lines, so that it fits ``limit`` characters."""
    lines = text.splitlines()
    while lines and len("\n".join(lines)) > limit:
        lines.pop(0)
    return "\n".join(lines)


class Threads:
    """Titles threads and keeps their older turns summarised."""

    def __init__(self, db: Database, llm: LLM, *, with_model: bool = False) -> None:
        self.db = db
        self.llm = llm
        self.with_model = with_model
        """Ask the fast model for titles and summaries (else plain extracts)."""

    async def title(self, text: str) -> str:
        """A title for a thread that starts with ``text``."""
        if self.with_model:
            try:
                raw = await self.llm.complete(
                    [
                        {"role": "system", "content": TITLE_PROMPT},
                        {"role": "user", "content": text[:1000]},
                    ],
                    fast=True,
                )
                named = raw.strip().strip("\"'").splitlines()[0:1]
                if named and named[0].strip():
                    return plain_title(named[0]) if len(named[0]) > TITLE_CHARS else named[0]
            except AgentError as exc:
                log.info("thread title from the first words (fast model failed: %s)", exc)
        return plain_title(text)

    async def _summarise(self, before: str | None, rows: Sequence[HistoryRow]) -> str:
        """The summary ``before`` brought up to date with ``rows``."""
        extract = plain_extract(rows)
        if self.with_model and extract:
            try:
                raw = await self.llm.complete(
                    [
                        {"role": "system", "content": SUMMARY_PROMPT},
                        {
                            "role": "user",
                            "content": f"Summary so far:\n{before or '(none)'}\n\n"
                            f"Newer messages:\n{extract[:6000]}",
                        },
                    ],
                    fast=True,
                )
                if raw.strip():
                    return keep_tail(raw.strip())
            except AgentError as exc:
                log.info("thread summary as a plain extract (fast model failed: %s)", exc)
        joined = "\n".join(part for part in (before, extract) if part)
        return keep_tail(joined)

    async def view(
        self,
        conv: ThreadState | None,
        rows: Sequence[HistoryRow],
        window: int,
        text: str,
        *,
        parent: Message | None = None,
    ) -> ThreadView:
        """The recent window of ``rows`` and a summary of the rest; titles a new thread.

        ``conv`` is the conversation as read in this turn (with ``rows``, its thread since its
        start or latest /new, oldest first, and ``parent``, the message a thread under a
        message hangs from). The summary is stored with the id of the newest row it covers,
        so a turn only adds the rows that left the window since, and only once there are
        ``SUMMARY_BATCH`` of them (one fast-model call then; until then they are shown as plain
        lines after the summary). What changed is not written here: ``ThreadView.save`` goes
        into the turn's own commit.
        """
        recent = rows[-window:] if window > 0 else []
        older = rows[: len(rows) - len(recent)]
        if conv is None or conv.id is None:
            return ThreadView(recent, None)
        title, summary, through = conv.title, conv.summary, conv.summary_through
        changed = False
        if not title and text.strip():
            title, changed = await self.title(text), True
        shown = summary
        if older and older[-1].id != through:
            newer = [r for r in older if through is None or (r.id or 0) > through]
            if len(newer) >= SUMMARY_BATCH:
                summary = await self._summarise(summary, newer)
                shown, through, changed = summary, older[-1].id, True
            else:  # a few rows: shown as they were said, folded in a later turn
                shown = keep_tail("\n".join(p for p in (summary, plain_extract(newer)) if p))
        save = None
        if changed:
            save = ThreadSave(conv.user_id, conv.id, title, summary, through)
        return ThreadView(recent, (shown or None) if older else None, parent, save)

    async def fresh(self, user_id: int, conversation_id: int, title: str | None) -> None:
        """Start the thread afresh (after /new): a new title (or none yet), no summary."""
        async with self.db.session() as s:
            await ConversationRepo(s).save_thread(
                user_id, conversation_id, title=title, summary=None, summary_through=None
            )
