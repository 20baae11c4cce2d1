"""The memory part of the composition root, buildable on its own.

``build_app`` builds memory through ``build_memory``; read-only CLI commands such as
``lifebot memory search`` use ``MemoryApp`` so that a cold start loads storage and memory
only (no channels, scheduler, web page or journal): the command answers in about a second.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.agent.llm import LLM
from bot.agent.memory.embeddings import Embedder
from bot.agent.memory.service import MemoryService
from bot.app.options import embedder_for
from bot.clock import Clock
from bot.config import Settings
from storage.db import Database
from storage.files.local import local_folder
from storage.files.private import private_dir


def build_memory(
    settings: Settings,
    db: Database,
    llm: LLM | None,
    clock: Clock,
    embedder: Embedder | None = None,
) -> MemoryService:
    """The memory service (facts, episodes, the search index) from settings.

    ``embedder`` is one already made (a cold CLI command starts loading it early); by
    default the settings' embedder is made here.
    """
    return MemoryService(
        db,
        llm,
        embedder or embedder_for(settings),
        clock,
        quiet_minutes=settings.extraction_quiet_minutes,
        every_messages=settings.extraction_every_messages,
        # Tokenised text of past searches: a cold `memory search` does not stem it all again.
        # A derived kind of the file store: always this host's folder (memory's FileKind).
        cache_dir=local_folder(settings.data_dir, "search-cache"),
    )


@dataclass
class MemoryApp:
    """Storage and memory without the rest of the app (no model client: nothing is extracted)."""

    settings: Settings
    """What the command was started with."""
    clock: Clock
    """The one source of "now"."""
    db: Database
    """Storage (SQLite or PostgreSQL)."""
    memory: MemoryService
    """Search, facts and the index."""

    @classmethod
    def build(cls, settings: Settings, clock: Clock, embedder: Embedder | None = None) -> MemoryApp:
        """Build it (no I/O yet; ``start`` migrates); ``embedder`` as in ``build_memory``."""
        db = Database(settings.database_url)
        return cls(settings, clock, db, build_memory(settings, db, None, clock, embedder))

    async def start(self) -> None:
        """Prepare storage, as ``start_app`` does."""
        await asyncio.to_thread(private_dir, self.settings.data_dir)
        await self.db.migrate()

    async def close(self) -> None:
        """Release the model and the connections."""
        await self.memory.close()
        await self.db.dispose()
