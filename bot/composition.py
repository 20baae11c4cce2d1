"""Composition root: build every object from Settings and wire them together.

Only the CLI calls this; everything else receives its collaborators in its constructor.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from bot.adapters.base import ChannelAdapter
from bot.agent.llm import OpenAILLM
from bot.agent.loop import Limits
from bot.agent.memory.wiring import wire_memory
from bot.agent.tools import calendar as calendar_tools
from bot.agent.tools import default_registry
from bot.agent.tools import reminders as reminder_tools
from bot.agent.tools.base import ToolRegistry
from bot.agent.turn import Agent
from bot.clock import Clock, SystemClock
from bot.commands import Commands
from bot.config import Settings
from bot.device.transcribe import FasterWhisperTranscriber
from bot.dispatch import Dispatcher
from bot.jobs.wiring import wire_jobs
from storage.db import Database

log = logging.getLogger(__name__)


@dataclass
class App:
    """Every long-lived object of one lifebot process."""

    settings: Settings
    db: Database
    llm: OpenAILLM
    tools: ToolRegistry
    agent: Agent
    commands: Commands
    dispatcher: Dispatcher
    clock: Clock
    adapters: list[ChannelAdapter] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    async def close(self) -> None:
        """Stop adapters and release connections."""
        jobs = self.extras.get("jobs")
        if jobs is not None:  # first: the outbox sends through the adapters
            await jobs.service.stop()
        for adapter in reversed(self.adapters):
            try:
                await adapter.stop()
            except Exception:
                log.exception("adapter %s did not stop cleanly", adapter.name)
        memory = self.extras.get("memory")
        if memory is not None:
            await memory.close()
        await self.llm.close()
        await self.db.dispose()


def build_app(settings: Settings, *, clock: Clock | None = None) -> App:
    """Build the object graph (no I/O yet; call ``start_app`` to migrate)."""
    clock = clock or SystemClock()
    db = Database(settings.database_url)
    llm = OpenAILLM(
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        model=settings.llm_model,
        fast_model=settings.llm_fast_model,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    tools = default_registry()
    extras: dict[str, Any] = {}
    # One speech model for every channel (pendant, voice notes); it loads on first use.
    extras["transcriber"] = FasterWhisperTranscriber.from_settings(settings)
    agent = Agent(
        db=db,
        llm=llm,
        tools=tools,
        clock=clock,
        limits=Limits(
            max_rounds=settings.max_tool_rounds,
            max_calls=settings.max_tool_calls,
            wall_seconds=settings.turn_timeout,
            context_tokens=settings.context_tokens,
            tool_result_tokens=settings.tool_result_tokens,
        ),
        persona_path=settings.persona_path,
        history_messages=settings.history_messages,
        extras=extras,
    )
    commands = Commands(db, clock, settings.default_timezone)
    dispatcher = Dispatcher(
        db=db,
        agent=agent,
        commands=commands,
        clock=clock,
        allowlist=settings.allowlisted(),
        default_timezone=settings.default_timezone,
    )
    # Speaking first (jobs): reminder and calendar tools, commands, proposal detection.
    for tool in [*reminder_tools.TOOLS, *calendar_tools.TOOLS]:
        tools.add(tool)
    extras["jobs"] = wire_jobs(
        settings,
        db=db,
        llm=llm,
        tools=tools,
        commands=commands,
        dispatcher=dispatcher,
        clock=clock,
    )
    # Memory: indexed, deduped facts, episodes, hybrid search tools, /sources, the turn hook.
    extras["memory"] = wire_memory(
        settings,
        db=db,
        llm=llm,
        clock=clock,
        tools=tools,
        commands=commands,
        dispatcher=dispatcher,
        agent=agent,
    )
    return App(settings, db, llm, tools, agent, commands, dispatcher, clock, extras=extras)


async def start_app(app: App) -> None:
    """Prepare storage (data dir, migrations)."""
    app.settings.data_dir.mkdir(parents=True, exist_ok=True)
    await app.db.migrate()
