"""Wire memory into the app: tools, the turn hook, commands, and the agent's collaborator.

Called once from the composition root, so ``bot/composition.py`` needs only a line.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.agent.llm import LLM
from bot.agent.memory.embeddings import build_embedder
from bot.agent.memory.service import MemoryService
from bot.agent.memory.sources import last_answer_citations, render_sources
from bot.agent.tools import memory as memory_tools
from bot.agent.tools.base import ToolRegistry
from bot.agent.turn import Agent
from bot.clock import Clock
from bot.commands import CommandContext, CommandReply, Commands
from bot.config import Settings
from bot.dispatch import Dispatcher
from storage.db import Database


def wire_memory(
    settings: Settings,
    *,
    db: Database,
    llm: LLM,
    clock: Clock,
    tools: ToolRegistry,
    commands: Commands,
    dispatcher: Dispatcher,
    agent: Agent,
) -> MemoryService:
    """Build the memory service and plug it in everywhere it is used."""
    embedder = build_embedder(
        settings.embeddings_model,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        timeout=settings.llm_timeout,
    )
    memory = MemoryService(
        db,
        llm,
        embedder,
        clock,
        quiet_minutes=settings.extraction_quiet_minutes,
        every_messages=settings.extraction_every_messages,
    )
    for tool in memory_tools.TOOLS:
        tools.add(tool)
    agent.memory = memory
    dispatcher.hooks.append(memory.on_turn)

    async def sources(ctx: CommandContext) -> CommandReply:
        async with db.session() as s:
            cited = await last_answer_citations(s, ctx.user_id, ctx.conversation_id)
        if not cited:
            return CommandReply("My last answer didn't rely on anything stored in your memory.")
        listing = render_sources(cited, _zone(ctx.user.timezone))
        return CommandReply("Sources of my last answer:\n" + listing)

    async def remember(ctx: CommandContext) -> CommandReply:
        if not ctx.args:
            return CommandReply("Usage: /remember something about you")
        decision = await memory.remember(ctx.user_id, ctx.args)
        reply = memory.remember_reply(decision)
        return CommandReply(f"{reply} (#{decision.fact.id})" if decision.fact else reply)

    async def forget(ctx: CommandContext) -> CommandReply:
        arg = ctx.args.lstrip("#")
        if not arg.isdigit():
            return CommandReply("Usage: /forget ID (send /facts to see the ids)")
        fact = await memory.keeper.forget(ctx.user_id, int(arg), clock.now())
        if fact is None:
            return CommandReply(f"You have no fact #{arg}.")
        return CommandReply(f"Forgotten: {fact.text}")

    commands.register("sources", sources, "show the sources of my last answer")
    commands.register("remember", remember, "remember a fact (/remember my sister is Ana)")
    commands.register("forget", forget, "forget a fact (/forget ID)")
    return memory


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")
