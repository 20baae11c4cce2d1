"""What the pages read of memory: facts with their sources, episodes, days of messages.

Memory's own service (``MemoryService``) learns, forgets and searches; this is the read side
the Memory, Facts and Day pages show, each call its own transaction and scoped to one user.
"""

from __future__ import annotations

from datetime import datetime

from storage.db import Database
from storage.models import Episode, Fact, MemoryItem, Message
from storage.repos.episodes import EpisodeRepo
from storage.repos.facts import FactRepo
from storage.repos.memory_index import MemoryIndexRepo
from storage.repos.web import WebViewRepo


class MemoryViews:
    """Reads of a user's memory for the pages (another user's id finds nothing)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def facts(self, user_id: int) -> list[Fact]:
        """What lifebot knows about the user (live facts)."""
        async with self.db.session() as s:
            return await FactRepo(s).active(user_id)

    async def fact(self, user_id: int, fact_id: int) -> tuple[Fact, list[Message]] | None:
        """A live fact and the messages it was learned from."""
        async with self.db.session() as s:
            repo = WebViewRepo(s)
            found = await repo.fact(user_id, fact_id)
            if found is None or found.forgotten_at is not None:
                return None
            return found, await repo.messages(user_id, list(found.source_message_ids or []))

    async def episode(self, user_id: int, episode_id: int) -> tuple[Episode, list[Message]] | None:
        """An episode and its messages; None when it is not the user's."""
        async with self.db.session() as s:
            ep = await EpisodeRepo(s).get(user_id, episode_id)
            if ep is None:
                return None
            return ep, await WebViewRepo(s).messages(user_id, list(ep.source_message_ids or []))

    async def episodes(
        self, user_id: int, start: datetime, end: datetime, limit: int
    ) -> list[Episode]:
        """Episodes between two instants (at most ``limit``)."""
        async with self.db.session() as s:
            return await EpisodeRepo(s).between(user_id, start, end, limit)

    async def spoken_between(self, user_id: int, start: datetime, end: datetime) -> list[Message]:
        """What was said between two instants."""
        async with self.db.session() as s:
            return await WebViewRepo(s).spoken_between(user_id, start, end)

    async def days_with_messages(self, user_id: int, limit: int) -> list[datetime]:
        """When the newest messages were said (one stamp per message, newest first)."""
        async with self.db.session() as s:
            return await WebViewRepo(s).days_with_messages(user_id, limit)

    async def indexed(self, user_id: int, kind: str, source_id: int) -> MemoryItem | None:
        """The user's index row of one message, episode, fact or document piece."""
        async with self.db.session() as s:
            item = await MemoryIndexRepo(s).by_source(kind, source_id)
        return item if item is not None and item.user_id == user_id else None

    async def chunk_messages(self, user_id: int, chunk_ids: list[int]) -> dict[int, int]:
        """The message each document piece came in (a piece's page opens that message)."""
        if not chunk_ids:
            return {}
        async with self.db.session() as s:
            return await WebViewRepo(s).chunk_messages(user_id, chunk_ids)
