"""The Facts pages' and API's operations: what lifebot knows, and MEMORY.md."""

from __future__ import annotations

from bot.agent.memory.facts import NOT_A_FACT, FactDecision
from bot.agent.memory.memory_file import ApplyReport, apply_text, write_for
from bot.agent.memory.service import MemoryService
from bot.agent.memory.views import MemoryViews
from bot.clock import Clock
from storage.models import Fact, Message, User


class FactRefused(ValueError):
    """New words for a fact that no fact can have (blank, too short, too long)."""


class WebFacts:
    """The user's facts, one user at a time (another user's fact is not found)."""

    def __init__(self, clock: Clock, engine: MemoryService, views: MemoryViews) -> None:
        self.clock = clock
        self.engine = engine
        """Remembers and forgets through the chat's own fact keeper."""
        self.views = views

    async def facts(self, user: User) -> list[Fact]:
        """What lifebot knows about the user."""
        assert user.id is not None
        return await self.views.facts(user.id)

    async def fact(self, user: User, fact_id: int) -> tuple[Fact, list[Message]] | None:
        """A live fact and the messages it was learned from."""
        assert user.id is not None
        return await self.views.fact(user.id, fact_id)

    async def remember(self, user: User, text: str) -> str:
        """Remember a fact the user typed; the reply in words."""
        return self.engine.remember_reply(await self.remember_decision(user, text))

    async def remember_decision(self, user: User, text: str) -> FactDecision:
        """Remember a fact the user typed; what happened (added, known, superseded...)."""
        assert user.id is not None
        return await self.engine.remember(user.id, text)

    async def edit_fact(self, user: User, fact_id: int, text: str) -> tuple[str, int] | None:
        """Replace a fact's words (keeping its sources); None when it is not the user's.

        Returns what was done, in words, and the id the fact has now (new words make a new fact).
        FactRefused, and nothing changed, when no fact can have these words.
        """
        assert user.id is not None
        found = await self.fact(user, fact_id)
        if found is None:
            return None
        old = found[0]
        text = text.strip()
        if text == old.text:
            return "Nothing changed.", fact_id
        refused = FactRefused(f"{NOT_A_FACT}; nothing was changed.")
        if not text:
            raise refused
        decision = await self.engine.remember(
            user.id, text, sources=list(old.source_message_ids or []), category=old.category
        )
        if decision.fact is None or decision.fact.id is None:
            raise refused
        if decision.fact.id != old.id:
            await self.engine.keeper.forget(user.id, fact_id, self.clock.now())
        return f"Saved: {decision.fact.text}", decision.fact.id

    async def forget(self, user: User, fact_id: int) -> Fact | None:
        """Forget a fact; None when it is not the user's."""
        assert user.id is not None
        return await self.engine.keeper.forget(user.id, fact_id, self.clock.now())

    async def restore_fact(self, user: User, fact_id: int) -> Fact | None:
        """Undo forgetting a fact; None when it is not the user's or cannot come back."""
        assert user.id is not None
        return await self.engine.keeper.restore(user.id, fact_id, self.clock.now())

    async def memory_file(self, user: User) -> str:
        """The user's facts and rules as MEMORY.md (``bot/agent/memory/memory_file.py``)."""
        assert user.id is not None
        name = user.display_name or "you"
        return await write_for(self.engine.keeper, user.id, name, self.clock.now())

    async def apply_memory_file(self, user: User, text: str) -> ApplyReport:
        """Read an edited MEMORY.md back into the user's facts (MemoryFileError if unreadable)."""
        assert user.id is not None
        return await apply_text(self.engine.keeper, user.id, text, self.clock.now())
