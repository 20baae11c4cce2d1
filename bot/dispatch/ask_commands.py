"""The /answer command: a press of a button under a question lifebot asked back."""

from __future__ import annotations

from datetime import timedelta

from bot.agent.ask import take_answer
from bot.chat import CommandContext, CommandReply, CommandTable
from bot.clock import Clock
from storage.db import Database


def register_ask_commands(
    commands: CommandTable, db: Database, clock: Clock, timeout: timedelta
) -> None:
    """Add /answer (sent by the question's buttons) to the command table."""

    async def answer(ctx: CommandContext) -> CommandReply:
        outcome = await take_answer(db, ctx.user_id, ctx.args, clock.now(), timeout)
        if outcome.resume is not None:
            return CommandReply("", resume_text=outcome.resume)
        return CommandReply(outcome.reply or "")

    commands.register("answer", answer, "answer a question I asked (sent by its buttons)")
