"""The chat commands over memory: /sources, /remember, /facts, /forget and /memoryfile."""

from __future__ import annotations

from bot.agent.memory.memory_file import MemoryFileError, apply_text, write_for
from bot.agent.memory.service import MemoryService
from bot.agent.rules import RULE_CATEGORY
from bot.agent.sources import last_answer_citations, render_sources
from bot.chat import CommandContext, CommandReply, CommandTable, row_id
from bot.clock import Clock, zone
from storage.db import Database
from storage.repos.facts import FactRepo
from storage.repos.messages import MessageRepo

CHAT_FILE_CHARS = 3500
"""A memory file longer than this is linked (the web page), not sent (chat message limits)."""


def register_memory_commands(
    commands: CommandTable, memory: MemoryService, db: Database, clock: Clock, web_url: str = ""
) -> None:
    """Add /sources, /remember, /facts, /forget and /memoryfile to the command table."""

    async def sources(ctx: CommandContext) -> CommandReply:
        async with db.session() as s:
            cited = await last_answer_citations(s, ctx.user_id, ctx.conversation_id)
        if not cited:
            return CommandReply("My last answer didn't rely on anything stored in your memory.")
        listing = render_sources(cited, zone(ctx.user.timezone))
        return CommandReply("Sources of my last answer:\n" + listing)

    async def this_message(ctx: CommandContext) -> list[int] | None:
        """The command's own stored message, as a fact's source ("forget that" finds it)."""
        async with db.session() as s:
            recent = await MessageRepo(s).history(ctx.user_id, ctx.conversation_id, 5)
        source = [
            m.id
            for m in recent
            if m.id is not None and m.direction == "in" and m.external_id == ctx.msg.message_id
        ]
        return source[-1:] or None

    async def remember(ctx: CommandContext) -> CommandReply:
        if not ctx.args:
            return CommandReply("Usage: /remember something about you")
        decision = await memory.remember(ctx.user_id, ctx.args, sources=await this_message(ctx))
        reply = memory.remember_reply(decision)
        return CommandReply(f"{reply} (#{decision.fact.id})" if decision.fact else reply)

    async def facts(ctx: CommandContext) -> CommandReply:
        async with db.session() as s:
            known = await FactRepo(s).active(ctx.user_id)
        if not known:
            return CommandReply("I don't know anything about you yet.")
        rules = [f for f in known if f.category == RULE_CATEGORY]
        soft = [f for f in known if f.category != RULE_CATEGORY]
        if not rules:
            return CommandReply("\n".join(f"#{f.id} {f.text}" for f in soft))
        # Rules are kept apart: they are always followed, and checked where a tool can.
        parts = ["Rules (always followed):", *(f"#{f.id} {f.text}" for f in rules)]
        if soft:
            parts += ["", "Facts:", *(f"#{f.id} {f.text}" for f in soft)]
        return CommandReply("\n".join(parts))

    async def forget(ctx: CommandContext) -> CommandReply:
        ident = row_id(ctx.args)
        if ident is None:
            return CommandReply("Usage: /forget ID (send /facts to see the ids)")
        fact = await memory.keeper.forget(ctx.user_id, ident, clock.now())
        if fact is None:
            return CommandReply(f"You have no fact #{ident}.")
        return CommandReply(f"Forgotten: {fact.text}")

    async def memory_file(ctx: CommandContext) -> CommandReply:
        if ctx.args.strip():
            # "/memoryfile" followed by an edited copy: read it back
            try:
                report = await apply_text(
                    memory.keeper,
                    ctx.user_id,
                    ctx.args,
                    clock.now(),
                    sources=await this_message(ctx),
                )
            except MemoryFileError as exc:
                return CommandReply(f"I couldn't read that as your memory file: {exc}.")
            return CommandReply(report.describe())
        name = ctx.user.display_name or "you"
        text = await write_for(memory.keeper, ctx.user_id, name, clock.now())
        page = f"{web_url}/memory/file" if web_url else "the web page's Memory file"
        if len(text) > CHAT_FILE_CHARS:
            return CommandReply(
                f"Your memory file is too long for a chat message: read and edit it at {page} "
                "(sign in with /web)."
            )
        return CommandReply(
            f"{text.rstrip()}\n\nEdit it and send it back as /memoryfile followed by the text, "
            f"or use {page}."
        )

    commands.register("sources", sources, "show the sources of my last answer")
    commands.register(
        "memoryfile",
        memory_file,
        "what I remember about you as MEMORY.md (send an edited copy back)",
    )
    commands.register("remember", remember, "remember a fact (/remember my sister is Ana)")
    commands.register("facts", facts, "list what I know about you")
    commands.register("forget", forget, "forget a fact (/forget ID)")
