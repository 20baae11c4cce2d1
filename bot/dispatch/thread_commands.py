"""/new and /threads: fresh, named contexts in the same chat, on any channel."""

from __future__ import annotations

from bot.agent.threads import TITLE_CHARS, Threads
from bot.dispatch.commands import CommandContext, CommandReply, Commands
from storage.db import Database
from storage.repos.messages import ConversationRepo

FRESH = (
    "Fresh start: my answers here no longer carry the earlier messages along. They stay in "
    "your memory, so I can still look them up when you ask."
)
NAMED_LATER = "I'll name this thread from your next message."


def register_thread_commands(commands: Commands, db: Database, threads: Threads) -> None:
    """Add /new (the agent cuts its history at the latest /new) and /threads."""

    async def new(ctx: CommandContext) -> CommandReply:
        title = " ".join(ctx.args.split())[:TITLE_CHARS] or None
        await threads.fresh(ctx.user_id, ctx.conversation_id, title)
        named = f'New thread: "{title}".' if title else NAMED_LATER
        return CommandReply(f"{FRESH} {named}")

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
