"""/new and /threads: fresh, named contexts in the same chat, on any channel."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bot.adapters.base import ChannelAdapter, TopicAdapter
from bot.agent.threads import TITLE_CHARS, Threads
from bot.chat import CommandContext, CommandReply, CommandTable
from bot.errors import ChannelError
from bot.messages import OutboundMessage
from storage.db import Database
from storage.repos.messages import ConversationRepo

FRESH = (
    "Fresh start: my answers here no longer carry the earlier messages along. They stay in "
    "your memory, so I can still look them up when you ask."
)
NAMED_LATER = "I'll name this thread from your next message."
NEW_TOPIC = "New conversation"
"""The name of a topic /new opens without a title (renamed in the app by the person)."""

log = logging.getLogger(__name__)


def register_thread_commands(
    commands: CommandTable,
    db: Database,
    threads: Threads,
    adapters: Mapping[str, ChannelAdapter] | None = None,
) -> None:
    """Add /new (the agent cuts its history at the latest /new) and /threads.

    ``adapters`` (the dispatcher's, filled as channels start): in a chat that has topics
    (a Telegram topic), /new opens a new topic instead of starting afresh in this one.
    """

    async def new(ctx: CommandContext) -> CommandReply:
        title = " ".join(ctx.args.split())[:TITLE_CHARS] or None
        adapter = (adapters or {}).get(ctx.msg.address.channel)
        if ctx.msg.address.thread_id and isinstance(adapter, TopicAdapter):
            opened = await _open_topic(ctx, adapter, title)
            if opened is not None:
                return opened
        await threads.fresh(ctx.user_id, ctx.conversation_id, title)
        named = f'New thread: "{title}".' if title else NAMED_LATER
        return CommandReply(f"{FRESH} {named}")

    async def _open_topic(
        ctx: CommandContext, adapter: TopicAdapter, title: str | None
    ) -> CommandReply | None:
        """A new topic for a fresh conversation; None when the chat cannot have one."""
        try:
            where = await adapter.open_topic(ctx.msg.address, title or NEW_TOPIC)
        except ChannelError as exc:
            log.info("/new: no new topic (%s); starting afresh in this one", exc)
            return None
        async with db.session() as s:
            conv = await ConversationRepo(s).get_or_create(ctx.user_id, where)
        assert conv.id is not None
        await threads.fresh(ctx.user_id, conv.id, title)
        named = f' "{title}"' if title else ""
        greeting = f"New topic{named}: this is a fresh conversation. "
        greeting += "What's on your mind?" if title else NAMED_LATER
        return CommandReply(
            f"Opened a new topic{named}. Write there for a fresh conversation; this topic "
            "keeps its own.",
            notify=[OutboundMessage(where, greeting, kind="notice")],
        )

    async def list_threads(ctx: CommandContext) -> CommandReply:
        async with db.session() as s:
            found = await ConversationRepo(s).titled(ctx.user_id)
        if not found:
            return CommandReply(
                "No named threads yet: each conversation is named on its first message."
            )
        lines = []
        for conv in found:
            where = conv.channel + (" thread" if conv.thread_id else "")
            here = " (here)" if conv.id == ctx.conversation_id else ""
            lines.append(f"• {conv.title} — {where}{here}")
        return CommandReply("Your threads, most recent first:\n" + "\n".join(lines))

    commands.register(
        "new", new, "start a fresh conversation (/new TITLE names it; earlier messages not carried)"
    )
    commands.register("threads", list_threads, "list your named conversations")
