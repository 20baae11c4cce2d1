"""One call for the composition root: build the jobs feature and plug it into the app."""

from __future__ import annotations

from bot.agent.llm import LLM
from bot.agent.tools.base import ToolRegistry
from bot.clock import Clock
from bot.commands import Commands
from bot.config import Settings
from bot.dispatch import Dispatcher
from bot.jobs.commands import JobCommands
from bot.jobs.service import Jobs, JobSettings, build_jobs
from storage.db import Database


def wire_jobs(
    settings: Settings,
    *,
    db: Database,
    llm: LLM,
    tools: ToolRegistry,
    commands: Commands,
    dispatcher: Dispatcher,
    clock: Clock,
) -> Jobs:
    """Build the jobs objects, register their commands and the proposal-detection hook.

    The scheduler is not started here: ``bot.serve`` starts it when jobs are enabled.
    """
    jobs = build_jobs(
        db=db,
        llm=llm,
        tools=tools,
        adapters=dispatcher.adapters,  # live: adapters registered later are seen too
        clock=clock,
        persona_path=settings.persona_path,
        settings=JobSettings(
            heartbeat=settings.jobs_heartbeat,
            lease_seconds=settings.jobs_lease_seconds,
            send_rate=settings.jobs_send_rate,
            late_hours=settings.briefing_late_hours,
            proposal_ttl_days=settings.proposal_ttl_days,
        ),
    )
    JobCommands(jobs, db, clock).register(commands)
    dispatcher.hooks.append(jobs.proposals.after_turn)
    return jobs
