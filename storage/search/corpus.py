"""One user's searchable items in memory: term postings, turn order, sessions and vectors.

Retrieval scores every item of a user in NumPy (BM25 over neighbouring-turn windows, cosine,
smoothing along the conversation), which neither FTS5 nor ``tsvector`` can express, and doing
it here gives SQLite and PostgreSQL the very same results. The copy is loaded once per user,
topped up with rows newer than the last one seen (one indexed ``max(id)`` query per search)
and linked into conversations: every message knows the two turns before and after it inside
its session (a run of its conversation without a 45-minute gap). Edits to existing rows reach
it through ``forget``/``set_hidden``/``set_vectors``, called by the memory index.

Memory (#22): a serving process holds this for every user it searched, so nothing here is a
Python object per item. Items are columns of NumPy arrays; postings are one CSR block (term ->
item positions and counts) plus a short tail of recent additions; texts are not kept (the few
hits shown are read from the database). Vectors are int8 with one float32 scale per item (a
quarter of float32's size; cosines move by about 1e-3, see ``quantise``), widened to float32
a block at a time while scoring. Loading reads the rows in chunks by id, texts first and
vectors second, so a load never holds every row of a user at once.
"""

from __future__ import annotations

import asyncio
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import MemoryItem, User
from storage.search.analysis import analyse, asks, self_words
from storage.search.termcache import Analysed, Saved, TermStore, row_digest
from storage.search.vectors import KIND_CODES

SESSION_GAP_S = 45 * 60.0
"""A silence this long in a conversation starts a new session (as episodes are cut)."""

CHUNK = 5000
"""Rows read per query while loading: what a load holds of the database at a time."""

BLOCK = 256
"""Vectors widened to float32 per step of a cosine scan."""

_MESSAGE = KIND_CODES["message"]

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Vectors = npt.NDArray[np.float32]
Mentions = Callable[[str, float], tuple[float, float] | None]
"""The time span a text names, resolved against when it was said ("yesterday" said on
4 May is 3 May), as (start, end) POSIX seconds; None when it names none."""


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
    asks: npt.NDArray[np.bool_]
    """The item asks a question."""
    self_words: npt.NDArray[np.uint8]
    """How often the item speaks in the first person ("I", "my", "we")."""
    near: Ints
    """Shape (4, n + 1): the turn two before, one before, one after, two after, or ``n``."""


@dataclass(frozen=True, slots=True)
class _Postings:
    """Term id -> (positions, counts): a CSR block plus a tail of later additions.

    Replaced, never changed, when items are added (the tail's arrays only grow past
    ``tail_n``), so a search holding one sees a consistent state.
    """

    offsets: Ints
    docs: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.int32]
    tail_tids: npt.NDArray[np.int32]
    tail_docs: npt.NDArray[np.int32]
    tail_tfs: npt.NDArray[np.int32]
    tail_n: int

    def flat(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """Every posting as (term ids, positions, counts), block first."""
        base = np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int32), np.diff(self.offsets))
        n = self.tail_n
        return (
            np.concatenate([base, self.tail_tids[:n]]),
            np.concatenate([self.docs, self.tail_docs[:n]]),
            np.concatenate([self.tfs, self.tail_tfs[:n]]),
        )


def _empty_postings() -> _Postings:
    none = np.zeros(0, dtype=np.int32)
    return _Postings(np.zeros(1, dtype=np.int64), none, none, none, none, none, 0)


def quantise(vectors: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int8], Vectors]:
    """Rows as int8 times a per-row scale (the row's largest magnitude over 127).

    For unit vectors of 384 dimensions a cosine moves by about 5e-4 (at most ~2e-3): far
    below the gaps that order search results (``python -m bench recall`` is unchanged).
    """
    x = np.asarray(vectors, dtype=np.float32)
    scale = (np.abs(x).max(axis=1) / 127.0).astype(np.float32) if len(x) else np.zeros(0)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    q = np.rint(x / safe[:, None]).clip(-127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def _grown(arr: npt.NDArray[Any], need: int, exact: bool, fill: object = 0) -> npt.NDArray[Any]:
    """``arr`` with room for ``need`` entries along its last axis (a copy when it grows)."""
    have = arr.shape[-1]
    if need <= have:
        return arr
    size = need if exact else max(need, have + have // 8 + 256)
    out = np.full((*arr.shape[:-1], size), fill, dtype=arr.dtype)
    out[..., :have] = arr
    return out


class _Staged:
    """Rows read for a corpus but not part of it yet (one load or top-up), in id order.

    Terms and speakers get their codes in the corpus's own tables at once (codes nobody
    uses are harmless); everything else waits here until ``Corpus.commit``.
    """

    def __init__(self, corpus: Corpus, known: Saved | None) -> None:
        self.corpus = corpus
        self.ids = array("q")
        self.ts = array("d")
        self.kinds = array("b")
        self.hidden = array("b")
        self.conv = array("q")
        """Conversation id, or -1 for none."""
        self.speakers = array("q")
        self.lengths = array("q")
        self.span_lo = array("d")
        self.span_hi = array("d")
        self.asks = array("b")
        self.self_words = array("B")
        self.digests = array("q")
        self.p_rows: list[npt.NDArray[np.int64]] = []
        self.p_tids: list[npt.NDArray[np.int32]] = []
        self.p_tfs: list[npt.NDArray[np.int32]] = []
        self.vectors: npt.NDArray[np.int8] | None = None
        self.scales: Vectors | None = None
        self.has_vector: npt.NDArray[np.bool_] | None = None
        self.reused = 0
        self.analysed = 0
        self.known = known
        self._id_arr: Ints | None = None
        if known is not None:
            order = np.argsort(known.ids, kind="stable")
            self._known_ids = known.ids[order]
            self._known_at = order
            self._known_map = np.full(len(known.vocab), -1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, raw: Sequence[tuple[object, ...]]) -> None:
        """Rows of (id, ts, kind, hidden, conversation, speaker, text), by id (CPU work)."""
        first = len(self.ids)
        digests = self._add_columns(raw)
        self._add_analyses(raw, first, digests)

    def _add_columns(self, raw: Sequence[tuple[object, ...]]) -> list[int]:
        """The plain columns of the rows; their digests (what the term cache is keyed by)."""
        names = self.corpus.speaker_names
        digests: list[int] = []
        for r in raw:
            ts = seconds(r[1])
            kind, speaker = str(r[2]), str(r[5] or "")
            conv = r[4]
            self.ids.append(int(str(r[0])))
            self.ts.append(ts)
            self.kinds.append(KIND_CODES.get(kind, 0))
            self.hidden.append(bool(r[3]))
            self.conv.append(int(str(conv)) if conv is not None else -1)
            self.speakers.append(names.setdefault(speaker.lower(), len(names)))
            digests.append(row_digest(kind, speaker, str(r[6] or ""), ts))
        self.digests.extend(digests)
        return digests

    def _add_analyses(
        self, raw: Sequence[tuple[object, ...]], first: int, digests: list[int]
    ) -> None:
        """Terms, lengths and traits of the rows: from the term cache, else tokenised."""
        corpus = self.corpus
        k = len(raw)
        lengths = np.zeros(k, dtype=np.int64)
        spans = np.full((2, k), np.nan, dtype=np.float64)
        asking = np.zeros(k, dtype=np.bool_)
        selfish = np.zeros(k, dtype=np.uint8)
        fresh = np.ones(k, dtype=np.bool_)
        known = self.known
        if known is not None and len(self._known_ids):
            ids = np.asarray(self.ids[first:], dtype=np.int64)
            at = np.minimum(np.searchsorted(self._known_ids, ids), len(self._known_ids) - 1)
            saved_at = self._known_at[at]
            hit = (self._known_ids[at] == ids) & (
                known.digests[saved_at] == np.asarray(digests, dtype=np.int64)
            )
            fresh = ~hit
            lengths[hit] = known.lengths[saved_at[hit]]
            spans[:, hit] = known.spans[saved_at[hit]].T
            asking[hit] = known.asks[saved_at[hit]]
            selfish[hit] = known.self_words[saved_at[hit]]
            self._reuse(np.flatnonzero(hit) + first, saved_at[hit])
        rows = array("q")
        tids = array("i")
        tfs = array("i")
        vocab = corpus.vocab
        for j in np.flatnonzero(fresh).tolist():
            r = raw[j]
            an = corpus.analyse(str(r[2]), str(r[5] or ""), str(r[6] or ""), self.ts[first + j])
            self.analysed += 1
            lengths[j] = an.length
            if an.span is not None:
                spans[:, j] = an.span
            asking[j] = an.asks
            selfish[j] = an.self_words
            for term, c in an.terms.items():
                rows.append(first + j)
                tids.append(vocab.setdefault(term, len(vocab)))
                tfs.append(c)
        self.lengths.extend(lengths.tolist())
        self.span_lo.extend(spans[0].tolist())
        self.span_hi.extend(spans[1].tolist())
        self.asks.extend(asking.astype(np.int8).tolist())
        self.self_words.extend(selfish.tolist())
        if rows:
            self.p_rows.append(np.array(rows, dtype=np.int64))
            self.p_tids.append(np.array(tids, dtype=np.int32))
            self.p_tfs.append(np.array(tfs, dtype=np.int32))

    def _reuse(self, rows: Ints, at: Ints) -> None:
        """Take the saved terms of the items at ``at`` in the file for ``rows``."""
        known = self.known
        assert known is not None
        self.reused += len(rows)
        lo, hi = known.offsets[at], known.offsets[at + 1]
        sizes = hi - lo
        total = int(sizes.sum())
        if not total:
            return
        # Indexes of every saved posting of these items, in one go.
        first = np.repeat(lo - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
        idx = first + np.arange(total)
        saved_tids = known.term_ids[idx]
        mapping = self._known_map
        vocab = self.corpus.vocab
        for t in np.unique(saved_tids[mapping[saved_tids] < 0]).tolist():
            mapping[t] = vocab.setdefault(known.vocab[t], len(vocab))
        self.p_rows.append(np.repeat(rows, sizes))
        self.p_tids.append(mapping[saved_tids].astype(np.int32))
        self.p_tfs.append(known.counts[idx].astype(np.int32))

    def add_vectors(self, raw: Sequence[tuple[object, ...]]) -> None:
        """Rows of (id, embedding) of this model, by id (CPU work)."""
        if not raw or not len(self.ids):
            return
        corpus = self.corpus
        dim = corpus.dim
        blobs = [bytes(r[1]) for r in raw]  # type: ignore[call-overload]
        if not dim:
            dim = len(blobs[0]) // 4
            if not dim:
                return
        keep = [n for n, b in enumerate(blobs) if len(b) == 4 * dim]
        if not keep:
            return
        if self._id_arr is None or len(self._id_arr) != len(self.ids):
            self._id_arr = np.array(self.ids, dtype=np.int64)
        ids = self._id_arr
        want = np.asarray([int(str(raw[n][0])) for n in keep], dtype=np.int64)
        at = np.searchsorted(ids, want)
        found = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == want)
        if not found.any():
            return
        x = np.frombuffer(b"".join(blobs[n] for n in keep), dtype="<f4").reshape(-1, dim)
        q, scale = quantise(x[found])
        if self.vectors is None:
            self.vectors = np.zeros((len(self.ids), dim), dtype=np.int8)
            self.scales = np.zeros(len(self.ids), dtype=np.float32)
            self.has_vector = np.zeros(len(self.ids), dtype=np.bool_)
            corpus.dim = dim
        assert self.scales is not None
        assert self.has_vector is not None
        rows = at[found]
        self.vectors[rows] = q
        self.scales[rows] = scale
        self.has_vector[rows] = True


class Corpus:
    """One user's items; append-only between reloads (see the module's notes on memory)."""

    def __init__(self, model: str = "", mentions: Mentions | None = None) -> None:
        self.dim = 0
        """Dimensions of the vectors (0 until the first one)."""
        self.model = model
        """The embedding model whose vectors these are."""
        self.mentions = mentions
        """Reads the time a text talks about (None: not read)."""
        self.max_id = 0
        """The highest item id loaded."""
        self.speaker_names: dict[str, int] = {}
        """Lower-cased speaker -> its code in ``Arrays.speaker``."""
        self.vocab: dict[str, int] = {}
        """Term -> its id in the postings."""
        self._n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._ts = np.zeros(0, dtype=np.float64)
        self._kinds = np.zeros(0, dtype=np.int8)
        self._hidden = np.zeros(0, dtype=np.bool_)
        self._speakers = np.zeros(0, dtype=np.int64)
        self._sessions = np.zeros(0, dtype=np.int64)
        self._lengths = np.zeros(0, dtype=np.float64)
        self._mentioned = np.zeros((2, 0), dtype=np.float64)
        self._asks = np.zeros(0, dtype=np.bool_)
        self._self_words = np.zeros(0, dtype=np.uint8)
        self._near = np.zeros((4, 0), dtype=np.int64)
        self._digests = np.zeros(0, dtype=np.int64)
        self._has_vector = np.zeros(0, dtype=np.bool_)
        self._scales = np.zeros(0, dtype=np.float32)
        self._vectors: npt.NDArray[np.int8] | None = None
        self._postings = _empty_postings()
        self._last: dict[int, int] = {}
        """Conversation id -> position of its newest message."""
        self._id_sorted = np.zeros(0, dtype=np.int64)
        self._id_pos = np.zeros(0, dtype=np.int64)
        self._recent: dict[int, int] = {}
        """Item id -> position, for items added since ``_id_sorted`` was built."""
        self._arrays: Arrays | None = None
        self._mutex = threading.Lock()
        """Held while columns change: a commit (in a worker thread) may replace an array that
        ``set_hidden``/``set_vectors`` (on the event loop) write to; neither is lost."""

    def __len__(self) -> int:
        """How many items."""
        return self._n

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the lock (``bench._train_ranker --cache`` pickles corpora)."""
        state = dict(self.__dict__)
        del state["_mutex"]
        # The time-word reader is the process's, not data (and may be a closure): a
        # restored corpus reads no new time words until it is given one again.
        state["mentions"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled corpus with a lock of its own."""
        for k, v in state.items():
            setattr(self, k, v)
        self._mutex = threading.Lock()

    def analyse(self, kind: str, speaker: str, text: str, ts: float) -> Analysed:
        """Terms, length and mentioned time span of one row (the costly part of loading)."""
        terms = analyse(f"{speaker}: {text}" if kind == "message" else text)
        counts: dict[str, int] = {}
        for t in terms:
            counts[t] = counts.get(t, 0) + 1
        span = self.mentions(text, ts) if self.mentions and kind == "message" else None
        return Analysed(counts, len(terms), span, asks(text), self_words(text))

    def commit(self, staged: _Staged) -> bool:
        """Append staged rows (ordered by time), linking messages to the turns around them.

        False, and nothing changes, when a row is older than a message already here in its
        conversation: the caller then reloads the whole corpus.
        """
        with self._mutex:
            return self._commit(staged)

    def _commit(self, staged: _Staged) -> bool:
        k = len(staged)
        if not k:
            return True
        ids = np.array(staged.ids, dtype=np.int64)
        ts = np.array(staged.ts, dtype=np.float64)
        kinds = np.array(staged.kinds, dtype=np.int8)
        conv = np.array(staged.conv, dtype=np.int64)
        if self._last:
            msg = (kinds == _MESSAGE) & (conv >= 0)
            for c in np.unique(conv[msg]).tolist():
                last = self._last.get(c)
                if last is not None and ts[msg & (conv == c)].min() < self._ts[last]:
                    return False
        order = np.lexsort((ids, ts))
        n = self._n
        self._reserve(n + k, exact=not n)
        end = n + k
        self._ids[n:end] = ids[order]
        self._ts[n:end] = ts[order]
        self._kinds[n:end] = kinds[order]
        self._hidden[n:end] = np.array(staged.hidden, dtype=np.bool_)[order]
        self._speakers[n:end] = np.array(staged.speakers, dtype=np.int64)[order]
        self._lengths[n:end] = np.array(staged.lengths, dtype=np.float64)[order]
        self._mentioned[0, n:end] = np.array(staged.span_lo, dtype=np.float64)[order]
        self._mentioned[1, n:end] = np.array(staged.span_hi, dtype=np.float64)[order]
        self._asks[n:end] = np.array(staged.asks, dtype=np.bool_)[order]
        self._self_words[n:end] = np.array(staged.self_words, dtype=np.uint8)[order]
        self._digests[n:end] = np.array(staged.digests, dtype=np.int64)[order]
        self._near[:, n:end] = -1
        self._commit_vectors(staged, order, n)
        self._commit_postings(staged, order, n)
        self._link(n, conv[order])
        self._n = end
        self.max_id = max(self.max_id, int(ids.max()))
        if not n or len(self._recent) + k > max(1024, end // 16):
            self._index_ids()
        else:
            self._recent.update(zip(ids[order].tolist(), range(n, end), strict=True))
        self._arrays = None
        return True

    def _reserve(self, need: int, exact: bool) -> None:
        """Room for ``need`` items in every column (exactly that on a first load)."""
        self._ids = _grown(self._ids, need, exact)
        self._ts = _grown(self._ts, need, exact)
        self._kinds = _grown(self._kinds, need, exact)
        self._hidden = _grown(self._hidden, need, exact)
        self._speakers = _grown(self._speakers, need, exact)
        self._sessions = _grown(self._sessions, need, exact)
        self._lengths = _grown(self._lengths, need, exact)
        self._mentioned = _grown(self._mentioned, need, exact, np.nan)
        self._asks = _grown(self._asks, need, exact, False)
        self._self_words = _grown(self._self_words, need, exact)
        self._near = _grown(self._near, need, exact, -1)
        self._digests = _grown(self._digests, need, exact)
        self._has_vector = _grown(self._has_vector, need, exact, False)
        self._scales = _grown(self._scales, need, exact)
        if self._vectors is not None and self._vectors.shape[0] < need:
            size = need if exact else max(need, need + need // 8 + 256)
            grown = np.zeros((size, self.dim), dtype=np.int8)
            grown[: self._vectors.shape[0]] = self._vectors
            self._vectors = grown

    def _commit_vectors(self, staged: _Staged, order: Ints, n: int) -> None:
        if staged.vectors is None:
            return
        assert staged.scales is not None
        assert staged.has_vector is not None
        k = len(order)
        if self._vectors is None:
            self._vectors = np.zeros((self._ids.shape[0], self.dim), dtype=np.int8)
        np.take(staged.vectors, order, axis=0, out=self._vectors[n : n + k])
        self._scales[n : n + k] = staged.scales[order]
        self._has_vector[n : n + k] = staged.has_vector[order]
        staged.vectors = None

    def _commit_postings(self, staged: _Staged, order: Ints, n: int) -> None:
        if not staged.p_rows:
            return
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(n, n + len(order))
        docs = where[np.concatenate(staged.p_rows)].astype(np.int32)
        tids = np.concatenate(staged.p_tids)
        tfs = np.concatenate(staged.p_tfs)
        by_doc = np.argsort(docs, kind="stable")
        p = self._postings
        t = p.tail_n
        size = t + len(docs)
        tail_tids = _grown(p.tail_tids, size, exact=False)
        tail_docs = _grown(p.tail_docs, size, exact=False)
        tail_tfs = _grown(p.tail_tfs, size, exact=False)
        tail_tids[t:size] = tids[by_doc]
        tail_docs[t:size] = docs[by_doc]
        tail_tfs[t:size] = tfs[by_doc]
        p = _Postings(p.offsets, p.docs, p.tfs, tail_tids, tail_docs, tail_tfs, size)
        if size > max(4096, len(p.docs) // 8):
            p = self._compacted(p)
        self._postings = p

    def _compacted(self, p: _Postings) -> _Postings:
        """The tail folded into the CSR block."""
        tids, docs, tfs = p.flat()
        # Stable: each term's positions stay ascending (block ones precede tail ones).
        by_term = np.argsort(tids, kind="stable")
        offsets = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tids, minlength=len(self.vocab)), out=offsets[1:])
        none = np.zeros(0, dtype=np.int32)
        return _Postings(offsets, docs[by_term], tfs[by_term], none, none, none, 0)

    def _link(self, n: int, conv: Ints) -> None:
        """Sessions and neighbouring turns of the items just written at ``n`` onwards."""
        ts, kinds = self._ts, self._kinds
        sessions, near = self._sessions, self._near
        last = self._last
        new_ts = ts[n : n + len(conv)].tolist()
        new_kinds = kinds[n : n + len(conv)].tolist()
        for j, c in enumerate(conv.tolist()):
            pos = n + j
            message = new_kinds[j] == _MESSAGE
            prev = last.get(c) if c >= 0 else None
            if message and prev is not None and new_ts[j] - float(ts[prev]) <= SESSION_GAP_S:
                sessions[pos] = sessions[prev]
                near[1, pos] = prev
                near[2, prev] = pos
                before = int(near[1, prev])
                if before >= 0:
                    near[0, pos] = before
                    near[3, before] = pos
            else:
                sessions[pos] = pos
            if message and c >= 0:
                last[c] = pos

    def _index_ids(self) -> None:
        n = self._n
        order = np.argsort(self._ids[:n], kind="stable")
        self._id_sorted = self._ids[:n][order]
        self._id_pos = order.astype(np.int64)
        self._recent = {}

    def _positions(self, ids: Sequence[int]) -> Ints:
        """Positions of these item ids (-1 for one not here)."""
        want = np.asarray(ids, dtype=np.int64).reshape(-1)
        out = np.full(len(want), -1, dtype=np.int64)
        srt = self._id_sorted
        if len(srt):
            at = np.minimum(np.searchsorted(srt, want), len(srt) - 1)
            hit = srt[at] == want
            out[hit] = self._id_pos[at[hit]]
        if self._recent:
            for n, item_id in enumerate(want.tolist()):
                if out[n] < 0:
                    out[n] = self._recent.get(item_id, -1)
        return out

    def set_vectors(self, ids: Sequence[int], vectors: Vectors) -> None:
        """Vectors of items already here (embedded after they were loaded)."""
        with self._mutex:
            self._set_vectors(ids, vectors)

    def _set_vectors(self, ids: Sequence[int], vectors: Vectors) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if not len(ids) or vectors.ndim != 2:
            return
        if self.dim and vectors.shape[1] != self.dim:
            return
        pos = self._positions(ids)
        found = pos >= 0
        if not found.any():
            return
        if self._vectors is None:
            self.dim = int(vectors.shape[1])
            self._vectors = np.zeros((self._ids.shape[0], self.dim), dtype=np.int8)
        q, scale = quantise(vectors[found])
        self._vectors[pos[found]] = q
        self._scales[pos[found]] = scale
        self._has_vector[pos[found]] = True

    def set_hidden(self, ids: Sequence[int]) -> None:
        """Keep these items out of results."""
        with self._mutex:
            pos = self._positions(ids)
            self._hidden[pos[pos >= 0]] = True
            self._arrays = None

    def cosine(self, qvec: npt.NDArray[Any]) -> Floats | None:
        """Cosine of every item to a unit vector (0 where an item has none yet).

        None when no item has a vector of ``qvec``'s size.
        """
        mat = self._vectors
        if mat is None or qvec.shape != (self.dim,):
            return None
        n = self._n
        q = np.asarray(qvec, dtype=np.float32)
        out = np.empty(n, dtype=np.float32)
        # A few hundred rows at a time: widened into a buffer that stays in cache, then one
        # small matrix-vector product each. Measured against one float32 product over the
        # whole matrix on a busy 2-core machine: about the same median, a steadier tail
        # (einsum straight from int8 took twice as long; large blocks stalled in BLAS's
        # thread hand-offs).
        buf = np.empty((min(BLOCK, n), self.dim), dtype=np.float32)
        for start in range(0, n, BLOCK):
            rows = buf[: min(BLOCK, n - start)]
            np.copyto(rows, mat[start : start + len(rows)], casting="unsafe")
            np.matmul(rows, q, out=out[start : start + len(rows)])
        out *= self._scales[:n]
        cos: Floats = out.astype(np.float64)
        return cos

    def matrix(self) -> Vectors | None:
        """Every vector as float32 (zeros where an item has none): a full copy, for tools."""
        if self._vectors is None:
            return None
        n = self._n
        out: Vectors = self._vectors[:n].astype(np.float32) * self._scales[:n, None]
        return out

    def missing_vectors(self) -> list[int]:
        """Ids of items without a vector."""
        n = self._n
        out: list[int] = self._ids[:n][~self._has_vector[:n]].tolist()
        return out

    def arrays(self) -> Arrays:
        """The per-item arrays (views of the columns; ``near`` is rebuilt after a change)."""
        if self._arrays is None:
            n = self._n
            near = np.empty((4, n + 1), dtype=np.int64)
            near[:, :n] = self._near[:, :n]
            near[:, n] = n
            near[near < 0] = n
            self._arrays = Arrays(
                ids=self._ids[:n],
                ts=self._ts[:n],
                kinds=self._kinds[:n],
                hidden=self._hidden[:n],
                speaker=self._speakers[:n],
                session=self._sessions[:n],
                lengths=self._lengths[:n],
                mentioned=self._mentioned[:, :n],
                asks=self._asks[:n],
                self_words=self._self_words[:n],
                near=near,
            )
        return self._arrays

    def term(self, stem: str) -> tuple[Ints, Floats]:
        """Positions (ascending) of the items holding ``stem`` and how often each holds it."""
        tid = self.vocab.get(stem)
        p = self._postings
        if tid is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        parts_d: list[npt.NDArray[np.int32]] = []
        parts_t: list[npt.NDArray[np.int32]] = []
        if tid < len(p.offsets) - 1:
            a, b = int(p.offsets[tid]), int(p.offsets[tid + 1])
            parts_d.append(p.docs[a:b])
            parts_t.append(p.tfs[a:b])
        if p.tail_n:
            sel = p.tail_tids[: p.tail_n] == tid
            parts_d.append(p.tail_docs[: p.tail_n][sel])
            parts_t.append(p.tail_tfs[: p.tail_n][sel])
        if not parts_d:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        docs = np.concatenate(parts_d).astype(np.int64)
        tfs = np.concatenate(parts_t).astype(np.float64)
        return docs, tfs

    def vector(self, item_id: int) -> Vectors | None:
        """An item's vector (None when it has none yet or is not here)."""
        pos = self.position(item_id)
        if pos is None or self._vectors is None or not self._has_vector[pos]:
            return None
        row: Vectors = self._vectors[pos].astype(np.float32) * self._scales[pos]
        return row

    def position(self, item_id: int) -> int | None:
        """Where an item sits in the arrays."""
        pos = int(self._positions([item_id])[0])
        return pos if pos >= 0 else None

    def saved(self) -> Saved:
        """Every item's analysis as the term cache stores it."""
        n = self._n
        tids, docs, tfs = self._postings.flat()
        by_doc = np.argsort(docs, kind="stable")
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(docs, minlength=n), out=offsets[1:])
        vocab = [""] * len(self.vocab)
        for term, t in self.vocab.items():
            vocab[t] = term
        return Saved(
            ids=self._ids[:n].copy(),
            digests=self._digests[:n].copy(),
            lengths=self._lengths[:n].astype(np.int32),
            spans=self._mentioned[:, :n].T.copy(),
            offsets=offsets,
            term_ids=tids[by_doc],
            counts=tfs[by_doc],
            vocab=vocab,
            asks=self._asks[:n].copy(),
            self_words=self._self_words[:n].copy(),
        )


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
        self._owners: dict[int, datetime | None] = {}
        """User id -> when the user whose corpus is cached was created: another person who
        gets a freed id (deleted and imported by another process, on SQLite) is not them."""
        self._locks: dict[int, asyncio.Lock] = {}
        self._unsaved: dict[int, int] = {}

    def forget(self, user_id: int | None = None) -> None:
        """Drop one user's corpus (every user's when ``None``); it is reloaded when needed."""
        if user_id is None:
            self._cache.clear()
        else:
            self._cache.pop(user_id, None)

    def loaded(self, user_id: int) -> Corpus | None:
        """The user's corpus as last loaded (no database check: it may lack the newest rows)."""
        return self._cache.get(user_id)

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

    def set_vectors(self, user_id: int, ids: Sequence[int], vectors: Vectors, model: str) -> None:
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
            # One round trip: the newest row, and whose id this is (see ``_owners``).
            born = select(User.created_at).where(User.id == user_id).scalar_subquery()
            newest, owner = (
                await session.exec(
                    select(func.max(MemoryItem.id), born).where(MemoryItem.user_id == user_id)
                )
            ).one()
            if corpus is None or corpus.model != model or self._owners.get(user_id) != owner:
                corpus = Corpus(model=model, mentions=self.mentions)
            if newest is not None and newest > corpus.max_id:
                staged = await self._stage(session, user_id, corpus, int(newest))
                # Linking turns, folding postings and saving the cache are CPU and disk
                # work: off the event loop.
                if not await asyncio.to_thread(corpus.commit, staged):
                    corpus = Corpus(model=model, mentions=self.mentions)
                    staged = await self._stage(session, user_id, corpus, int(newest))
                    await asyncio.to_thread(corpus.commit, staged)
                corpus.max_id = max(corpus.max_id, int(newest))
                await asyncio.to_thread(self._loaded, user_id, corpus, staged)
            self._cache[user_id] = corpus
            self._owners[user_id] = owner
            return corpus

    async def _stage(
        self, session: AsyncSession, user_id: int, corpus: Corpus, newest: int
    ) -> _Staged:
        """Read the rows after ``corpus.max_id`` up to ``newest``, a chunk at a time."""
        full = not len(corpus)
        known = None
        if full and self.store is not None:
            known = await asyncio.to_thread(self.store.load, user_id)
        staged = _Staged(corpus, known)
        conn = await session.connection()
        after = corpus.max_id
        while True:
            rows = await _chunk(conn, _TEXT_COLUMNS, user_id, after, newest)
            if not rows:
                break
            # Reading the cache and tokenising are CPU work: off the event loop.
            await asyncio.to_thread(staged.add, rows)
            after = int(str(rows[-1][0]))
        staged.known = None
        after = corpus.max_id
        while True:
            rows = await _chunk(conn, _VECTOR_COLUMNS, user_id, after, newest, corpus.model)
            if not rows:
                break
            await asyncio.to_thread(staged.add_vectors, rows)
            after = int(str(rows[-1][0]))
        return staged

    def _note(self, user_id: int, corpus: Corpus, staged: _Staged, full: bool) -> None:
        """Note what a load reused; save the analyses when enough are new."""
        self.last_load[user_id] = LoadStats(staged.reused, staged.analysed)
        if self.store is None:
            return
        unsaved = self._unsaved.get(user_id, 0) + staged.analysed
        # A full load that had to tokenise anything is what the next cold process would
        # repeat: save it now. A running server saves in batches instead of per message.
        if (full and staged.analysed) or unsaved >= SAVE_AFTER:
            self.store.save(user_id, corpus.saved())
            unsaved = 0
        self._unsaved[user_id] = unsaved

    def _loaded(self, user_id: int, corpus: Corpus, staged: _Staged) -> None:
        """Note what a load reused, save the analyses when enough are new, return memory."""
        full = len(corpus) == len(staged)
        self._note(user_id, corpus, staged, full)
        if full and len(staged) >= CHUNK:
            release_freed_memory()


def release_freed_memory() -> bool:
    """Hand freed heap pages back to the system (glibc's ``malloc_trim``); True if any were.

    A full load borrows memory for its chunks of rows and their analysis, in many small
    blocks that glibc keeps after they are freed: about 50 MB of the resident set at 100k
    items, until this is called. Other C libraries are left alone.
    """
    import ctypes  # noqa: PLC0415

    try:
        # The running process's own symbols (no ctypes.util.find_library: it runs ldconfig).
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return False
    return bool(trim(0)) if trim is not None else False


def seconds(value: object) -> float:
    """POSIX seconds of a stored time as the driver returns it (``_TEXT_COLUMNS``).

    SQLite gives the stored text ("2024-05-04 18:00:00.000000", UTC without an offset),
    asyncpg a ``datetime``. Parsed here with ``datetime.fromisoformat`` rather than through
    the column's type: SQLAlchemy's parser and ``UTCDateTime`` cost about 20 us a row, most of
    a cold load's reading of 3,000 rows.
    """
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(when, datetime):
        raise TypeError(f"not a stored time: {value!r}")
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


_TEXT_COLUMNS = (
    col(MemoryItem.id),
    # The raw value, not a datetime made by the column's type: see ``seconds``.
    sa.type_coerce(col(MemoryItem.ts), sa.String()).label("ts"),
    col(MemoryItem.kind),
    col(MemoryItem.hidden),
    col(MemoryItem.conversation_id),
    col(MemoryItem.speaker),
    col(MemoryItem.text),
)
_VECTOR_COLUMNS = (col(MemoryItem.id), col(MemoryItem.embedding))


async def _chunk(
    conn: AsyncConnection,
    columns: tuple[Any, ...],
    user_id: int,
    after: int,
    newest: int,
    model: str | None = None,
) -> list[tuple[object, ...]]:
    """Up to ``CHUNK`` rows of a user with ids in (after, newest], by id."""
    stmt = (
        sa.select(*columns)
        .where(
            col(MemoryItem.user_id) == user_id,
            col(MemoryItem.id) > after,
            col(MemoryItem.id) <= newest,
        )
        .order_by(col(MemoryItem.id))
        .limit(CHUNK)
    )
    if model is not None:
        stmt = stmt.where(
            col(MemoryItem.embed_model) == model, col(MemoryItem.embedding).is_not(None)
        )
    return [tuple(r) for r in (await conn.execute(stmt)).all()]
