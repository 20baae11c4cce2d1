"""The Memory pages' and search API's operations: search, days, conversations, episodes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from bot.agent.conversations import Conversations
from bot.agent.memory.service import MemoryService
from bot.agent.memory.views import MemoryViews
from bot.clock import Clock, zone
from bot.jobs.localtime import local_instant
from bot.web.sources import source_link
from storage.models import Episode, Message, User


@dataclass(slots=True)
class Hit:
    """One memory search result and where to open it."""

    kind: str
    """``message``, ``transcript``, ``episode`` or ``fact``."""
    source_id: int
    when: datetime
    channel: str
    speaker: str
    text: str
    matched: str
    link: str
    """The page that shows the source (a conversation opened at the cited turn)."""


@dataclass(slots=True)
class SearchResult:
    """Hits, the words that matched (to highlight) and anything the search must say."""

    hits: list[Hit]
    terms: list[str]
    note: str | None = None


class WebMemory:
    """What the user said and lived, one user at a time (another user's is not found)."""

    def __init__(
        self,
        clock: Clock,
        engine: MemoryService,
        views: MemoryViews,
        conversations: Conversations,
    ) -> None:
        self.clock = clock
        self.engine = engine
        """The chat's memory: indexing and the retriever (MCP's search uses it too)."""
        self.views = views
        """Facts with their sources, episodes, days of messages."""
        self.conversations = conversations

    async def search(self, user: User, query: str, limit: int = 10) -> SearchResult:
        """Search the user's memory; each hit links to its source."""
        assert user.id is not None
        await self.engine.index_pending(user.id)
        outcome = await self.engine.retriever.search(
            user.id, query, now=self.clock.now(), tz=zone(user.timezone), limit=limit
        )
        pieces = [ev.item.source_id for ev in outcome.evidence if ev.item.kind == "document"]
        chunks = await self.views.chunk_messages(user.id, pieces)
        hits = []
        for ev in outcome.evidence:
            item = ev.item
            kind = (
                "transcript" if item.kind == "message" and item.channel == "device" else item.kind
            )
            hits.append(
                Hit(
                    kind=kind,
                    source_id=item.source_id,
                    when=item.ts,
                    channel=item.channel,
                    speaker=item.speaker,
                    text=item.text,
                    matched=ev.matched,
                    link=source_link(item.kind, str(item.source_id), chunks)[0] or "/memory",
                )
            )
        # ``outcome.note`` is written for the model ("do not guess"); people get ``said``.
        note = outcome.said if not hits or outcome.plan.unresolved else None
        return SearchResult(hits, list(outcome.plan.terms), note)

    async def day(self, user: User, day: date) -> list[Message]:
        """What was said on one local day."""
        assert user.id is not None
        tz = zone(user.timezone)
        start = local_instant(day, time(0), tz)
        end = local_instant(day + timedelta(days=1), time(0), tz)
        return await self.views.spoken_between(user.id, start, end)

    async def recent_days(self, user: User, limit: int = 400) -> list[date]:
        """Local days with messages, newest first."""
        assert user.id is not None
        tz = zone(user.timezone)
        stamps = await self.views.days_with_messages(user.id, limit)
        return list(dict.fromkeys(t.astimezone(tz).date() for t in stamps))

    async def around(self, user: User, message_id: int) -> tuple[Message, list[Message]] | None:
        """A message and its conversation around it; None when it is not the user's."""
        assert user.id is not None
        return await self.conversations.around(user.id, message_id)

    async def episode(self, user: User, episode_id: int) -> tuple[Episode, list[Message]] | None:
        """An episode and its messages; None when it is not the user's."""
        assert user.id is not None
        return await self.views.episode(user.id, episode_id)

    async def episodes(self, user: User, days: int = 30) -> list[Episode]:
        """Episodes of the last ``days`` days, newest first."""
        assert user.id is not None
        now = self.clock.now()
        found = await self.views.episodes(user.id, now - timedelta(days=days), now, 100)
        return sorted(found, key=lambda e: e.start_at, reverse=True)
