"""A person's facts and MEMORY.md as the memory-file tests read them."""

from __future__ import annotations

from bot.agent.memory.memory_file import write_for
from bot.app.build import App
from storage.models import Fact
from storage.repos.facts import FactRepo


async def active_facts(app: App, user_id: int) -> dict[str, str]:
    """The user's active facts: text -> category."""
    async with app.db.session() as s:
        return {f.text: f.category for f in await FactRepo(s).active(user_id)}


async def active_fact(app: App, user_id: int, words: str) -> Fact:
    """The user's active fact whose text holds ``words`` (the first one)."""
    async with app.db.session() as s:
        return next(f for f in await FactRepo(s).active(user_id) if words in f.text)


async def memory_file(app: App, user_id: int, name: str = "Ana") -> str:
    """The user's MEMORY.md as ``lifebot memory file`` would write it now."""
    return await write_for(app.memory.keeper, user_id, name, app.clock.now())
