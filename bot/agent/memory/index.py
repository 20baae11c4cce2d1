"""The memory index: copies messages, episodes and facts into ``memoryitem`` and embeds them.

``index_pending`` is public and idempotent: anything that stores messages by another path
(pendant transcripts, imports) may call it, and the turn hook and the background task do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from bot.agent.memory.embeddings import Embedder
from bot.errors import EmbeddingError
from storage.db import Database
from storage.models import Episode, Fact, JournalEntry, MemoryItem, Message
from storage.repos.memory_index import MemoryIndexRepo
from storage.search import FullTextIndex, VectorIndex, full_text_for, vector_index_for
from storage.search.corpus import Corpus, CorpusCache, Mentions

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
"""Called with the number of rows just done (drives the CLI's progress bar)."""


def message_row(msg: Message) -> dict[str, Any]:
    """The index row for a message."""
    meta = msg.meta or {}
    speaker = str(meta.get("speaker") or meta.get("sender_name") or "")
    if not speaker and msg.channel == "device":
        speaker = "ambient"
    return {
        "user_id": msg.user_id,
        "kind": "message",
        "source_id": msg.id,
        "ts": msg.created_at,
        "conversation_id": msg.conversation_id,
        "channel": msg.channel,
        "speaker": speaker,
        "ref": str(meta.get("import_id") or msg.external_id or msg.id),
        "text": msg.text,
        "hidden": False,
    }


def episode_text(ep: Episode) -> str:
    """What of an episode is searchable: title, summary, people and topics."""
    extra = ", ".join([*(ep.people or []), *(ep.topics or [])])
    return f"{ep.title}. {ep.summary}" + (f" ({extra})" if extra else "")


class MemoryIndex:
    """Owns the embedder and the search backends for one process."""

    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        *,
        batch_size: int = 256,
        mentions: Mentions | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.batch_size = batch_size
        self.dialect = "sqlite" if db.is_sqlite else "postgresql"
        self.fulltext: FullTextIndex = full_text_for(self.dialect)
        self._vectors: VectorIndex | None = None
        self.corpora = CorpusCache(mentions)
        """Per-user in-memory copies that retrieval scores (see ``storage.search.corpus``)."""
        self._lock = asyncio.Lock()

    async def corpus(self, user_id: int) -> Corpus:
        """The user's searchable items, with vectors of the current model."""
        async with self.db.session() as s:
            return await self.corpora.get(s, user_id, self.embedder.model_id)

    async def vectors(self) -> VectorIndex:
        """The vector backend (pgvector is detected on first use)."""
        if self._vectors is None:
            async with self.db.session() as s:
                self._vectors = await vector_index_for(s)
            log.info("vector search backend: %s", type(self._vectors).__name__)
        return self._vectors

    async def index_pending(
        self, *, user_id: int | None = None, progress: Progress | None = None
    ) -> int:
        """Index every memory-worthy message not yet indexed, then embed what lacks a vector.

        Returns how many messages were added. Safe to call concurrently and repeatedly.
        """
        added = 0
        async with self._lock:
            while True:
                async with self.db.session() as s:
                    msgs = await MemoryIndexRepo(s).unindexed_messages(self.batch_size, user_id)
                    if not msgs:
                        break
                    await MemoryIndexRepo(s).add([message_row(m) for m in msgs])
                added += len(msgs)
                if progress is not None:
                    progress(len(msgs))
            await self._embed_missing(user_id)
        return added

    async def embed_missing(
        self, user_id: int | None = None, progress: Progress | None = None
    ) -> int:
        """Embed every item without a vector of the current model."""
        async with self._lock:
            return await self._embed_missing(user_id, progress)

    async def size(self, user_id: int | None = None) -> int:
        """How many items are indexed (for one user, or everyone)."""
        async with self.db.session() as s:
            return await MemoryIndexRepo(s).count(user_id)

    async def _embed_missing(self, user_id: int | None, progress: Progress | None = None) -> int:
        vectors = await self.vectors()
        done = 0
        model = self.embedder.model_id
        while True:
            async with self.db.session() as s:
                todo = await MemoryIndexRepo(s).missing_embeddings(model, self.batch_size, user_id)
            if not todo:
                return done
            try:
                matrix = await self.embedder.embed([t for _, _, t in todo])
            except EmbeddingError as exc:
                # Full text still works; the vectors come on the next run.
                log.warning("could not embed %d memory items: %s", len(todo), exc)
                return done
            async with self.db.session() as s:
                await MemoryIndexRepo(s).set_embeddings(
                    [(i, matrix[n].astype("<f4").tobytes()) for n, (i, _, _) in enumerate(todo)],
                    model,
                )
                by_user: dict[int, list[int]] = {}
                for n, (_, uid, _) in enumerate(todo):
                    by_user.setdefault(uid, []).append(n)
                for uid, rows in by_user.items():
                    ids = [todo[n][0] for n in rows]
                    await vectors.store(s, uid, ids, matrix[rows].astype(np.float32), model)
                    self.corpora.set_vectors(uid, ids, matrix[rows].astype(np.float32), model)
            done += len(todo)
            if progress is not None:
                progress(len(todo))

    async def put_episode(self, ep: Episode) -> None:
        """Index (or re-index) an episode."""
        await self.put_episodes([ep])

    async def put_episodes(self, eps: list[Episode]) -> None:
        """Index (or re-index) episodes in one transaction.

        A one-message episode is not indexed: its message already is, and the copy would
        only crowd search results.
        """
        eps = [ep for ep in eps if len(ep.source_message_ids or []) > 1]
        if not eps:
            return
        async with self.db.session() as s:
            items = [await self._upsert_episode(MemoryIndexRepo(s), ep) for ep in eps]
            changed = [(i.user_id, i.id) for i in items]
        vectors = await self.vectors()
        for uid in {ep.user_id for ep in eps}:
            vectors.forget(uid)
        for uid, item_id in changed:
            self.corpora.changed(uid, item_id)

    @staticmethod
    async def _upsert_episode(repo: MemoryIndexRepo, ep: Episode) -> MemoryItem:
        assert ep.id is not None
        return await repo.upsert(
            {
                "user_id": ep.user_id,
                "kind": "episode",
                "source_id": ep.id,
                "ts": ep.start_at,
                "ts_end": ep.end_at,
                "channel": ep.channel,
                "speaker": ", ".join(ep.people or []),
                "ref": f"episode:{ep.id}",
                "text": episode_text(ep),
                "hidden": False,
            }
        )

    async def put_journal(self, entries: list[JournalEntry]) -> None:
        """Index (or re-index after an edit) journal entries, so answers can cite them."""
        if not entries:
            return
        async with self.db.session() as s:
            for e in entries:
                assert e.id is not None
                await MemoryIndexRepo(s).upsert(
                    {
                        "user_id": e.user_id,
                        "kind": "journal",
                        "source_id": e.id,
                        "ts": e.written_at,
                        "speaker": "me",
                        "ref": f"journal:{e.id}",
                        "text": e.text,
                        "hidden": False,
                    }
                )
        vectors = await self.vectors()
        for uid in {e.user_id for e in entries}:
            vectors.forget(uid)

    async def shadow_messages(self, user_id: int, msgs: list[Message]) -> None:
        """Index these messages as hidden (search shows their text once, as another item).

        A journal entry written with "journal: ..." is found as the entry, not twice.
        """
        if not msgs:
            return
        async with self.db.session() as s:
            await MemoryIndexRepo(s).add([{**message_row(m), "hidden": True} for m in msgs])
        await self.hide_messages(user_id, [m.id for m in msgs if m.id is not None])

    async def put_fact(self, fact: Fact) -> None:
        """Index a fact."""
        assert fact.id is not None
        async with self.db.session() as s:
            item = await MemoryIndexRepo(s).upsert(
                {
                    "user_id": fact.user_id,
                    "kind": "fact",
                    "source_id": fact.id,
                    "ts": fact.created_at,
                    "speaker": fact.category,
                    "ref": f"fact:{fact.id}",
                    "text": fact.text,
                    "hidden": False,
                }
            )
            item_id = item.id
        self.corpora.changed(fact.user_id, item_id)

    async def drop_fact(self, user_id: int, fact_id: int) -> None:
        """Remove a forgotten or superseded fact from the index."""
        async with self.db.session() as s:
            item = await MemoryIndexRepo(s).by_source("fact", fact_id)
            item_id = item.id if item is not None else None
            await MemoryIndexRepo(s).delete_source(user_id, "fact", fact_id)
        if item_id is not None:
            self.corpora.set_hidden(user_id, [item_id])

    async def hide_messages(self, user_id: int, message_ids: list[int]) -> None:
        """Keep these messages out of search results (questions asked of memory)."""
        async with self.db.session() as s:
            item_ids = await MemoryIndexRepo(s).hide_messages(user_id, message_ids)
        vectors = await self.vectors()
        setter = getattr(vectors, "set_hidden", None)
        if setter is not None and item_ids:
            setter(user_id, item_ids)
        self.corpora.set_hidden(user_id, item_ids)

    async def reindex(self, *, user_id: int | None = None, progress: Progress | None = None) -> int:
        """Index anything missing, then embed every item again with the current model."""
        await self.index_pending(user_id=user_id)
        async with self.db.session() as s:
            await MemoryIndexRepo(s).clear_embeddings(user_id)
            if self.dialect == "sqlite":
                # Rebuild FTS5 from the content table in case it was ever out of step.
                conn = await s.connection()
                await conn.exec_driver_sql(
                    "INSERT INTO memoryitem_fts(memoryitem_fts) VALUES ('rebuild')"
                )
        vectors = await self.vectors()
        self.corpora.forget(user_id)
        if user_id is not None:
            vectors.forget(user_id)
        else:
            self._vectors = None
        return await self.embed_missing(user_id, progress)

    async def embed_query(self, text: str) -> np.ndarray[Any, np.dtype[np.float32]] | None:
        """The query's vector, or None when the embedder is unavailable."""
        try:
            vec: np.ndarray[Any, np.dtype[np.float32]] = (await self.embedder.embed([text]))[0]
        except EmbeddingError as exc:
            log.warning("query embedding failed, searching full text only: %s", exc)
            return None
        return vec

    @staticmethod
    def item_ids(items: list[MemoryItem]) -> list[int]:
        """Ids of items (helper for callers that build filters)."""
        return [i.id for i in items if i.id is not None]
