"""One user's searchable items in memory: term postings, turn order, sessions and vectors.

Retrieval scores every item of a user in NumPy (BM25 over neighbouring-turn windows, cosine,
smoothing along the conversation), which neither FTS5 nor ``tsvector`` can express, and doing
it here gives SQLite and PostgreSQL the very same results. The copy is loaded once per user,
topped up with rows newer than the last one seen (one indexed ``max(id)`` query per search)
and linked into conversations: every message knows the two turns before and after it inside
its session (a run of its conversation without a 45-minute gap). Edits to existing rows reach
it through ``forget``/``set_hidden``/``set_vectors``, called by the memory index.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import MemoryItem
from storage.search.analysis import analyse
from storage.search.termcache import Analysed, TermStore, row_digest
from storage.search.vectors import KIND_CODES

SESSION_GAP_S = 45 * 60.0
"""A silence this long in a conversation starts a new session (as episodes are cut)."""

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Mentions = Callable[[str, float], tuple[float, float] | None]
"""The time span a text names, resolved against when it was said ("yesterday" said on
4 May is 3 May), as (start, end) POSIX seconds; None when it names none."""


@dataclass(frozen=True, slots=True)
class Row:
    """What the corpus keeps of one ``memoryitem`` row."""

    id: int
    ts: float
    kind: str
    hidden: bool
    conversation: int | None
    speaker: str
    text: str
    vector: npt.NDArray[np.float32] | None = None
    digest: int = 0
    """``termcache.row_digest`` of the row: a cached analysis is used only when it matches."""


Known = dict[int, tuple[int, Analysed]]
"""Item id -> (digest, analysis) read from the term cache."""


@dataclass(frozen=True, slots=True)
class Arrays:
    """The corpus as arrays (index ``n`` is a sentinel: a missing neighbour points there)."""

    ids: Ints
    ts: Floats
    kinds: npt.NDArray[np.int8]
    hidden: npt.NDArray[np.bool_]
    speaker: Ints
    session: Ints
    lengths: Floats
    mentioned: Floats
    """Shape (2, n): start and end of the time each item talks about (NaN: none)."""
    near: Ints
    """Shape (4, n + 1): the turn two before, one before, one after, two after, or ``n``."""


@dataclass
class Corpus:
    """One user's items; append-only between reloads, rows kept in (conversation, time) order."""

    dim: int = 0
    model: str = ""
    mentions: Mentions | None = None
    ids: list[int] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    hidden: list[bool] = field(default_factory=list)
    speakers: list[int] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    mentioned: list[tuple[float, float]] = field(default_factory=list)
    near: list[list[int]] = field(default_factory=lambda: [[], [], [], []])
    speaker_names: dict[str, int] = field(default_factory=dict)
    postings: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)
    max_id: int = 0
    digests: list[int] = field(default_factory=list)
    """Each item's row digest (what the term cache is checked against)."""
    _last: dict[int, int] = field(default_factory=dict)
    """Conversation id -> position of its newest message."""
    _positions: dict[int, int] = field(default_factory=dict)
    _matrix: npt.NDArray[np.float32] | None = None
    _has_vector: list[bool] = field(default_factory=list)
    _arrays: Arrays | None = None
    _term_cache: dict[str, tuple[Ints, Floats]] = field(default_factory=dict)

    def __len__(self) -> int:
        """How many items."""
        return len(self.ids)

    def accepts(self, rows: Sequence[Row]) -> bool:
        """Whether ``rows`` can be appended without breaking conversation order."""
        for r in rows:
            last = self._last.get(r.conversation) if r.conversation is not None else None
            if last is not None and r.kind == "message" and r.ts < self.ts[last]:
                return False
        return True

    def append(self, rows: Sequence[Row], known: Known | None = None) -> int:
        """Add rows (sorted by time) and link messages to the turns around them.

        ``known`` holds analyses from the term cache; one is used only when its digest is the
        row's. Returns how many rows had to be analysed here.
        """
        fresh = 0
        for r in rows:
            cached = known.get(r.id) if known else None
            if cached is not None and cached[0] == r.digest:
                an = cached[1]
            else:
                an = self.analyse(r)
                fresh += 1
            self._append_one(r, an)
        self._arrays = None
        return fresh

    def analyse(self, r: Row) -> Analysed:
        """Terms, length and mentioned time span of one row (the costly part of loading)."""
        terms = analyse(f"{r.speaker}: {r.text}" if r.kind == "message" else r.text)
        counts: dict[str, int] = {}
        for t in terms:
            counts[t] = counts.get(t, 0) + 1
        span = self.mentions(r.text, r.ts) if self.mentions and r.kind == "message" else None
        return Analysed(counts, len(terms), span)

    def analysed(self) -> list[tuple[int, int, Analysed]]:
        """(item id, digest, analysis) of every item, rebuilt from the postings (to save)."""
        per_item: list[dict[str, int]] = [{} for _ in self.ids]
        for term, (docs, tfs) in self.postings.items():
            for d, c in zip(docs, tfs, strict=True):
                per_item[d][term] = c
        out = []
        for pos, item_id in enumerate(self.ids):
            lo, hi = self.mentioned[pos]
            span = None if math.isnan(lo) else (lo, hi)
            out.append(
                (item_id, self.digests[pos], Analysed(per_item[pos], self.lengths[pos], span))
            )
        return out

    def _append_one(self, r: Row, an: Analysed) -> None:
        pos = len(self.ids)
        self.ids.append(r.id)
        self._positions[r.id] = pos
        self.ts.append(r.ts)
        self.kinds.append(KIND_CODES.get(r.kind, 0))
        self.hidden.append(r.hidden)
        self.speakers.append(
            self.speaker_names.setdefault(r.speaker.lower(), len(self.speaker_names))
        )
        self.digests.append(r.digest)
        self.lengths.append(an.length)
        self.mentioned.append(an.span or (np.nan, np.nan))
        for t, c in an.terms.items():
            # Only the postings of this row's terms change: the other arrays stay valid.
            self._term_cache.pop(t, None)
            docs, tfs = self.postings.setdefault(t, ([], []))
            docs.append(pos)
            tfs.append(c)
        for lst in self.near:
            lst.append(-1)
        prev = self._last.get(r.conversation) if r.conversation is not None else None
        if r.kind == "message" and prev is not None and r.ts - self.ts[prev] <= SESSION_GAP_S:
            self.sessions.append(self.sessions[prev])
            self.near[1][pos] = prev
            self.near[2][prev] = pos
            before = self.near[1][prev]
            if before >= 0:
                self.near[0][pos] = before
                self.near[3][before] = pos
        else:
            self.sessions.append(pos)
        if r.kind == "message" and r.conversation is not None:
            self._last[r.conversation] = pos
        self.max_id = max(self.max_id, r.id)
        self._has_vector.append(False)
        self._set_vector(pos, r.vector)

    def _set_vector(self, pos: int, vector: npt.NDArray[np.float32] | None) -> None:
        if vector is None or (self.dim and vector.shape[0] != self.dim):
            return
        if self._matrix is None:
            self.dim = int(vector.shape[0])
            self._matrix = np.zeros((max(64, pos + 1), self.dim), dtype=np.float32)
        self._grow(pos + 1)
        assert self._matrix is not None
        self._matrix[pos] = vector
        self._has_vector[pos] = True

    def _grow(self, rows: int) -> None:
        if self._matrix is not None and rows > self._matrix.shape[0]:
            grown = np.zeros((max(2 * self._matrix.shape[0], rows), self.dim), np.float32)
            grown[: self._matrix.shape[0]] = self._matrix
            self._matrix = grown

    def set_vectors(self, ids: Sequence[int], vectors: npt.NDArray[np.float32]) -> None:
        """Vectors of items already here (embedded after they were loaded)."""
        for item_id, vec in zip(ids, vectors, strict=True):
            pos = self._positions.get(int(item_id))
            if pos is not None:
                self._set_vector(pos, vec)

    def set_hidden(self, ids: Sequence[int]) -> None:
        """Keep these items out of results."""
        for item_id in ids:
            pos = self._positions.get(int(item_id))
            if pos is not None:
                self.hidden[pos] = True
        self._arrays = None

    def matrix(self) -> npt.NDArray[np.float32] | None:
        """The vectors, one row per item (zeros where an item has none yet)."""
        if self._matrix is None:
            return None
        self._grow(len(self.ids))
        return self._matrix[: len(self.ids)]

    def missing_vectors(self) -> list[int]:
        """Ids of items without a vector."""
        return [self.ids[p] for p, ok in enumerate(self._has_vector) if not ok]

    def arrays(self) -> Arrays:
        """The per-item arrays (rebuilt only after a change)."""
        if self._arrays is None:
            n = len(self.ids)
            near = np.array([[*lst, -1] for lst in self.near], dtype=np.int64).reshape(4, n + 1)
            near[near < 0] = n
            self._arrays = Arrays(
                ids=np.asarray(self.ids, dtype=np.int64),
                ts=np.asarray(self.ts, dtype=np.float64),
                kinds=np.asarray(self.kinds, dtype=np.int8),
                hidden=np.asarray(self.hidden, dtype=np.bool_),
                speaker=np.asarray(self.speakers, dtype=np.int64),
                session=np.asarray(self.sessions, dtype=np.int64),
                lengths=np.asarray(self.lengths, dtype=np.float64),
                mentioned=np.asarray(self.mentioned, dtype=np.float64).reshape(n, 2).T,
                near=near,
            )
        return self._arrays

    def term(self, stem: str) -> tuple[Ints, Floats]:
        """Positions of the items holding ``stem`` and how often each holds it."""
        got = self._term_cache.get(stem)
        if got is None:
            docs, tfs = self.postings.get(stem, ([], []))
            got = (np.asarray(docs, dtype=np.int64), np.asarray(tfs, dtype=np.float64))
            self._term_cache[stem] = got
        return got

    def vector(self, item_id: int) -> npt.NDArray[np.float32] | None:
        """An item's vector (None when it has none yet or is not here)."""
        pos = self._positions.get(item_id)
        if pos is None or self._matrix is None or not self._has_vector[pos]:
            return None
        row: npt.NDArray[np.float32] = self._matrix[pos]
        return row

    def position(self, item_id: int) -> int | None:
        """Where an item sits in the arrays."""
        return self._positions.get(item_id)


def _rows(raw: Sequence[tuple[object, ...]], model: str) -> list[Row]:
    out = []
    for r in raw:
        ts = r[1]
        assert isinstance(ts, datetime)
        blob = r[7]
        vec = None
        if blob is not None and r[8] == model:
            vec = np.frombuffer(bytes(blob), dtype="<f4").astype(np.float32)  # type: ignore[call-overload]
        conv = r[4]
        kind, speaker, text, when = str(r[2]), str(r[5] or ""), str(r[6] or ""), ts.timestamp()
        out.append(
            Row(
                id=int(str(r[0])),
                ts=when,
                kind=kind,
                hidden=bool(r[3]),
                conversation=int(str(conv)) if conv is not None else None,
                speaker=speaker,
                text=text,
                vector=vec,
                digest=row_digest(kind, speaker, text, when),
            )
        )
    out.sort(key=lambda row: (row.ts, row.id))
    return out


@dataclass(frozen=True, slots=True)
class LoadStats:
    """How the last corpus load of a user went (for tests and ``bench memory``)."""

    reused: int
    """Rows whose analysis came from the term cache."""
    analysed: int
    """Rows tokenised in this process."""


SAVE_AFTER = 32
"""Rewrite a user's term cache once this many rows were analysed since it was last written."""


class CorpusCache:
    """Corpora of the users searched in this process, kept fresh by ``max(id)``.

    With a ``TermStore`` a cold process reuses the analyses a previous one saved and tokenises
    only the rows that are new or changed since (see ``storage.search.termcache``).
    """

    def __init__(self, mentions: Mentions | None = None, store: TermStore | None = None) -> None:
        self.mentions = mentions
        self.store = store
        self.last_load: dict[int, LoadStats] = {}
        """User id -> what their last load reused and analysed."""
        self._cache: dict[int, Corpus] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._unsaved: dict[int, int] = {}

    def forget(self, user_id: int | None = None) -> None:
        """Drop one user's corpus (every user's when ``None``); it is reloaded when needed."""
        if user_id is None:
            self._cache.clear()
        else:
            self._cache.pop(user_id, None)

    def changed(self, user_id: int, item_id: int | None) -> None:
        """An item was rewritten in place: reload the corpus if it holds the old version.

        A new item needs nothing: the next search picks it up by its id.
        """
        corpus = self._cache.get(user_id)
        if corpus is not None and item_id is not None and corpus.position(item_id) is not None:
            self.forget(user_id)

    def set_hidden(self, user_id: int, ids: Sequence[int]) -> None:
        """Mark items hidden in a loaded corpus."""
        corpus = self._cache.get(user_id)
        if corpus is not None:
            corpus.set_hidden(ids)

    def set_vectors(
        self, user_id: int, ids: Sequence[int], vectors: npt.NDArray[np.float32], model: str
    ) -> None:
        """New vectors of items a loaded corpus may hold already."""
        corpus = self._cache.get(user_id)
        if corpus is None:
            return
        if corpus.model != model:
            self.forget(user_id)
            return
        corpus.set_vectors(ids, vectors)

    async def get(self, session: AsyncSession, user_id: int, model: str) -> Corpus:
        """The user's corpus, topped up with rows added since the last call."""
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        async with lock:
            corpus = self._cache.get(user_id)
            if corpus is None or corpus.model != model:
                corpus = Corpus(model=model, mentions=self.mentions)
            newest = (
                await session.exec(
                    select(func.max(MemoryItem.id)).where(MemoryItem.user_id == user_id)
                )
            ).one()
            if newest is not None and newest > corpus.max_id:
                rows = _rows(await self._load(session, user_id, corpus.max_id), model)
                if not corpus.accepts(rows):
                    corpus = Corpus(model=model, mentions=self.mentions)
                    rows = _rows(await self._load(session, user_id, 0), model)
                # Reading the cache and tokenising are CPU and disk work: off the event loop.
                await asyncio.to_thread(self._fill, user_id, corpus, rows)
                corpus.max_id = max(corpus.max_id, int(newest))
            self._cache[user_id] = corpus
            return corpus

    def _fill(self, user_id: int, corpus: Corpus, rows: list[Row]) -> None:
        """Append rows, reusing saved analyses on a full load; save when enough are new."""
        full = not len(corpus)
        known = self.store.load(user_id) if self.store is not None and full else None
        analysed = corpus.append(rows, known)
        self.last_load[user_id] = LoadStats(len(rows) - analysed, analysed)
        if self.store is None:
            return
        unsaved = self._unsaved.get(user_id, 0) + analysed
        # A full load that had to tokenise anything is what the next cold process would
        # repeat: save it now. A running server saves in batches instead of per message.
        if (full and analysed) or unsaved >= SAVE_AFTER:
            self.store.save(user_id, corpus.analysed())
            unsaved = 0
        self._unsaved[user_id] = unsaved

    @staticmethod
    async def _load(session: AsyncSession, user_id: int, after: int) -> list[tuple[object, ...]]:
        stmt = sa.select(
            col(MemoryItem.id),
            col(MemoryItem.ts),
            col(MemoryItem.kind),
            col(MemoryItem.hidden),
            col(MemoryItem.conversation_id),
            col(MemoryItem.speaker),
            col(MemoryItem.text),
            col(MemoryItem.embedding),
            col(MemoryItem.embed_model),
        ).where(col(MemoryItem.user_id) == user_id, col(MemoryItem.id) > after)
        conn = await session.connection()
        return [tuple(r) for r in (await conn.execute(stmt)).all()]
