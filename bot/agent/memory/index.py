"""The memory index: copies messages, episodes and facts into ``memoryitem`` and embeds them.

``index_pending`` is public and idempotent: anything that stores messages by another path
(pendant transcripts, imports) may call it, and the turn hook and the background task do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlmodel.ext.asyncio.session import AsyncSession

from bot.agent.memory.embeddings import Embedder
from bot.errors import EmbeddingError
from storage.db import Database
from storage.models import DocumentChunk, Episode, Fact, JournalEntry, MemoryItem, Message
from storage.repos.memory_index import MemoryIndexRepo, MessageColumns, embed_text
from storage.search import FullTextIndex, VectorIndex, full_text_for, vector_index_for
from storage.search.corpus import Corpus, CorpusCache, Mentions
from storage.search.termcache import TermStore

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
"""Called with the number of rows just done (drives the CLI's progress bar)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """How much of what is stored is searchable, and how: ``lifebot memory status``."""

    model: str
    """The embedding model whose vectors count."""
    unindexed: int
    """Messages stored but not yet indexed (not searchable at all yet)."""
    kinds: dict[str, tuple[int, int]]
    """Kind -> (items indexed, of which still without a vector: found by words only)."""

    @property
    def without_vectors(self) -> int:
        """Indexed items still waiting for their vector."""
        return sum(w for _, w in self.kinds.values())


def message_row(msg: Message | MessageColumns) -> dict[str, Any]:
    """The index row for a message (an ORM row, or a row of its columns)."""
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


GREETING_WORDS = 3
"""Messages of at most this many words get no vector on the turn's own path."""


def worth_embedding(text: str) -> bool:
    """Whether a message says enough to be embedded at once (not "hi", "thanks!", "ok")."""
    return len(text.split()) > GREETING_WORDS


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
        cache_dir: Path | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.batch_size = batch_size
        self.dialect = "sqlite" if db.is_sqlite else "postgresql"
        self.fulltext: FullTextIndex = full_text_for(self.dialect)
        self._vectors: VectorIndex | None = None
        # The term cache is keyed by the database too: two databases never share entries.
        # A probe of the time-word reader goes into the cache's version: if it reads dates
        # differently, files written before are ignored.
        probe = repr(mentions("we met last friday", 1.7e9)) if mentions else ""
        store = TermStore(cache_dir, db.url, fingerprint=probe) if cache_dir else None
        self.corpora = CorpusCache(mentions, store)
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
        self,
        *,
        user_id: int | None = None,
        progress: Progress | None = None,
        embed: bool = True,
        settled_before: datetime | None = None,
    ) -> int:
        """Index every memory-worthy message not yet indexed, then embed what lacks a vector.

        The rows are searchable by their words as soon as they are indexed; ``embed=False``
        leaves the vectors to a later ``embed_missing`` (the background task, an import's
        second step). ``settled_before``: see ``embed_missing``. Returns how many messages
        were added. Safe to call concurrently and repeatedly.
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
        if embed:
            await self.embed_missing(user_id, settled_before=settled_before)
        return added

    async def embed_missing(
        self,
        user_id: int | None = None,
        progress: Progress | None = None,
        *,
        settled_before: datetime | None = None,
    ) -> int:
        """Embed every item without a vector of the current model, one batch at a time.

        The lock is taken per batch, so a new message is indexed between two batches of a
        long backlog (an import) instead of after all of it. ``settled_before``: an episode
        whose last line is newer is still growing and waits (``Extractor.settled``); None
        embeds every item.
        """
        done = 0
        while True:
            async with self._lock:
                n = await self._embed_batch(user_id, settled_before)
            if n < 0:
                return done
            done += n
            if progress is not None:
                progress(n)
            if n < self.batch_size:
                return done

    async def embed_sources(self, user_id: int, kind: str, source_ids: Sequence[int]) -> int:
        """Embed the items of these sources that lack a vector; how many were embedded.

        What a write just indexed (a fact, an episode, a picture, a document) is found by its
        (kind, source id) key, so the cost does not grow with the user's history; anything
        older still without a vector is the background pass's (``embed_missing``).
        """
        if not source_ids:
            return 0
        model = self.embedder.model_id
        done = 0
        ids = list(source_ids)
        for start in range(0, len(ids), self.batch_size):
            async with self._lock:
                async with self.db.session() as s:
                    todo = await MemoryIndexRepo(s).unembedded_messages(
                        user_id, ids[start : start + self.batch_size], model, kind=kind
                    )
                if todo and not await self.embed_items(todo):
                    return done  # the embedder failed: the background pass retries
            done += len(todo)
        return done

    async def waiting(self, user_id: int | None = None) -> Waiting:
        """What is stored but not yet fully searchable (for ``lifebot memory status``)."""
        async with self.db.session() as s:
            repo = MemoryIndexRepo(s)
            kinds = await repo.count_by_kind(user_id, self.embedder.model_id)
            unindexed = await repo.count_unindexed(user_id)
        return Waiting(self.embedder.model_id, unindexed, kinds)

    async def size(self, user_id: int | None = None) -> int:
        """How many items are indexed (for one user, or everyone)."""
        async with self.db.session() as s:
            return await MemoryIndexRepo(s).count(user_id)

    async def _embed_batch(self, user_id: int | None, settled_before: datetime | None) -> int:
        """Embed one batch; how many were embedded (-1: the model failed, try later)."""
        model = self.embedder.model_id
        async with self.db.session() as s:
            todo = await MemoryIndexRepo(s).missing_embeddings(
                model, self.batch_size, user_id, settled_before=settled_before
            )
        if not todo:
            return 0
        return len(todo) if await self.embed_items(todo) else -1

    async def index_messages(
        self, user_id: int, message_ids: Sequence[int]
    ) -> list[tuple[int, int, str]]:
        """Index these messages of one user now; returns what is left to embed.

        The turn hook's path: it reads only the given rows, never scans for what else is
        unindexed (``index_pending`` and the background pass do that), so its cost does not
        grow with the user's history. The caller embeds the returned (item id, user id, text)
        rows with ``embed_items``, batched. Short messages (greetings, "ok") are left to the
        background pass: a vector of "hi" is not worth a model call per turn.
        """
        async with self.db.session() as s:
            return await self.index_messages_in(s, user_id, message_ids)

    @staticmethod
    async def index_messages_in(
        s: AsyncSession, user_id: int, message_ids: Sequence[int]
    ) -> list[tuple[int, int, str]]:
        """``index_messages`` in the caller's unit of work (a turn's own commit)."""
        # One statement: the rows are made from the messages in the database itself.
        added = await MemoryIndexRepo(s).index_from_messages(user_id, message_ids)
        return [
            (item_id, user_id, embed_text("message", speaker, text))
            for item_id, text, speaker in added
            if worth_embedding(text)
        ]

    async def embed_items(self, todo: list[tuple[int, int, str]]) -> bool:
        """Embed and store (item id, user id, text) rows; False when the embedder failed."""
        vectors = await self.vectors()
        model = self.embedder.model_id
        try:
            matrix = await self.embedder.embed([t for _, _, t in todo])
        except EmbeddingError as exc:
            # Full text still works; the vectors come on the next run.
            log.warning("could not embed %d memory items: %s", len(todo), exc)
            return False
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
        return True

    async def put_episode(self, ep: Episode) -> None:
        """Index (or re-index) an episode."""
        await self.put_episodes([ep])

    async def put_episodes(self, eps: list[Episode]) -> None:
        """Index (or re-index) episodes in one transaction.

        A one-message episode is not indexed: its message already is, and the copy would
        only crowd search results.
        """
        if not [ep for ep in eps if len(ep.source_message_ids or []) > 1]:
            return
        async with self.db.session() as s:
            changed = await self.index_episodes_in(s, eps)
        await self.episodes_indexed(changed)

    async def index_episodes_in(
        self, s: AsyncSession, eps: list[Episode]
    ) -> list[tuple[int, int | None]]:
        """``put_episodes``' writes in the caller's unit of work: (user, item) of each row.

        Once that unit commits, hand the result to ``episodes_indexed``.
        """
        eps = [ep for ep in eps if len(ep.source_message_ids or []) > 1]
        items = [await self._upsert_episode(MemoryIndexRepo(s), ep) for ep in eps]
        return [(i.user_id, i.id) for i in items]

    async def episodes_indexed(self, changed: list[tuple[int, int | None]]) -> None:
        """Tell the search caches about episode rows just committed (``index_episodes_in``)."""
        if not changed:
            return
        vectors = await self.vectors()
        for uid in {uid for uid, _ in changed}:
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

    async def put_image(self, msg: Message, text: str) -> None:
        """Index what a message's pictures show (their description and visible text).

        Kept apart from the message's own words (kind ``image``, keyed by the message id), so
        "the photo of the wifi password" finds the picture even when it came without a caption.
        """
        assert msg.id is not None
        assert msg.user_id is not None
        async with self.db.session() as s:
            item = await MemoryIndexRepo(s).upsert(
                {
                    "user_id": msg.user_id,
                    "kind": "image",
                    "source_id": msg.id,
                    "ts": msg.created_at,
                    "conversation_id": msg.conversation_id,
                    "channel": msg.channel,
                    "speaker": "photo",
                    "ref": f"image:{msg.id}",
                    "text": text,
                    "hidden": False,
                }
            )
            item_id = item.id
        self.corpora.changed(msg.user_id, item_id)
        assert msg.id is not None
        await self.embed_sources(msg.user_id, "image", [msg.id])

    async def put_document_chunks(self, msg: Message, chunks: list[DocumentChunk]) -> None:
        """Index the pieces of a document (kind ``document``; the reference names the page)."""
        if not chunks:
            return
        async with self.db.session() as s:
            await MemoryIndexRepo(s).add(
                [
                    {
                        "user_id": c.user_id,
                        "kind": "document",
                        "source_id": c.id,
                        "ts": msg.created_at,
                        "conversation_id": msg.conversation_id,
                        "channel": msg.channel,
                        "speaker": c.name,
                        "ref": f"{c.name} p. {c.page}",
                        "text": c.text,
                        "hidden": False,
                    }
                    for c in chunks
                ]
            )
        await self.embed_sources(
            chunks[0].user_id, "document", [c.id for c in chunks if c.id is not None]
        )

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
        vecs = await self.embed_queries([text])
        return None if vecs is None else vecs[0]

    async def embed_queries(
        self, texts: list[str]
    ) -> list[np.ndarray[Any, np.dtype[np.float32]]] | None:
        """Vectors of a few query texts in one model call, or None when it failed."""
        try:
            matrix = await self.embedder.embed(texts)
        except EmbeddingError as exc:
            log.warning("query embedding failed, searching full text only: %s", exc)
            return None
        return [matrix[i] for i in range(len(texts))]

    @staticmethod
    def item_ids(items: list[MemoryItem]) -> list[int]:
        """Ids of items (helper for callers that build filters)."""
        return [i.id for i in items if i.id is not None]
