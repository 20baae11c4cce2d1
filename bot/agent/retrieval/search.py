"""Hybrid retrieval: full text and vectors fused by weighted reciprocal rank.

Then a relevance floor, name boosts, diversity, neighbouring turns as context, and a token
budget.

A time window named in the question is a hard filter on both retrievers and fails closed:
when nothing is stored inside it the outcome says so instead of searching wider.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np

from bot.agent.budget import count_tokens
from bot.agent.memory.index import MemoryIndex
from bot.agent.retrieval.query import QueryPlan, understand
from storage.models import MemoryItem
from storage.repos.memory_index import OWN_SPEAKERS, MemoryIndexRepo
from storage.search.base import SearchFilter


@dataclass(frozen=True, slots=True)
class RetrievalTuning:
    """The knobs, set from measurements on the labelled corpus (tests/memory_corpus.py)."""

    fts_weight: float = 1.0
    vector_weight: float = 0.7
    """A small local model is weaker than stemmed BM25 on chat text: it gets less say."""
    rrf_k: int = 60
    name_boost: float = 0.01
    candidates: int = 50
    floor: float = 0.38
    """Cosine at or above which a hit is evidence on meaning alone."""
    weak_floor: float = 0.2
    """Cosine below which a full-text hit needs two shared words to count."""
    duplicate: float = 0.95
    """Cosine above which two hits count as the same thing said twice."""
    budget_tokens: int = 1200
    context_turns: int = 1
    window_listing: int = 25
    """At most this many items when a question names only a time ("what did I do Saturday")."""


@dataclass(slots=True)
class Evidence:
    """One retrieved item with why it matched and the turns around it."""

    item: MemoryItem
    score: float
    matched: str
    """``words``, ``meaning``, ``words+meaning``, ``recent`` or ``time``."""
    context: list[MemoryItem] = field(default_factory=list)


@dataclass(slots=True)
class SearchOutcome:
    """What a search found, and anything the answer must say about it."""

    plan: QueryPlan
    evidence: list[Evidence]
    note: str | None = None


def _names_in(item: MemoryItem, names: Sequence[str]) -> int:
    """How many of ``names`` the item's speaker or text mentions."""
    hay = f"{item.speaker} {item.text}".lower()
    return sum(1 for n in names if re.search(rf"\b{re.escape(n.lower())}\b", hay))


def _coverage(item: MemoryItem, terms: Sequence[str]) -> int:
    """How many query words (roughly stemmed) occur in the item."""
    hay = f"{item.speaker} {item.text}".lower()
    return sum(1 for t in terms if t[: max(4, len(t) - 2)] in hay)


_ABOUT_ME = re.compile(r"\b(I|me|my|mine)\b")


def _vector(item: MemoryItem) -> np.ndarray[tuple[int], np.dtype[np.float32]] | None:
    if item.embedding is None:
        return None
    return np.frombuffer(item.embedding, dtype="<f4")


class Retriever:
    """Searches one user's memory."""

    def __init__(self, index: MemoryIndex, tuning: RetrievalTuning | None = None) -> None:
        self.index = index
        self.tuning = tuning or RetrievalTuning()

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        now: datetime,
        tz: ZoneInfo,
        start: datetime | None = None,
        end: datetime | None = None,
        people: list[str] | None = None,
        limit: int = 8,
        kinds: tuple[str, ...] = ("message", "episode", "fact", "journal"),
        exclude_message_ids: Sequence[int] = (),
    ) -> SearchOutcome:
        """Search; see the module doc for the steps."""
        plan = understand(query, now, tz, start=start, end=end, people=people)
        if plan.unresolved and plan.window is None:
            return SearchOutcome(
                plan,
                [],
                f"I can't turn '{plan.unresolved}' into dates, so I did not search by time. "
                "Tell the user that and ask for a date; do not guess.",
            )
        if plan.window is not None:
            kinds = tuple(k for k in kinds if k != "fact")  # facts have no time of their own
        exclude = await self._excluded(user_id, exclude_message_ids)
        flt = SearchFilter(
            user_id,
            plan.window.start if plan.window else None,
            plan.window.end if plan.window else None,
            kinds,
            frozenset(exclude),
        )
        if plan.recency and not plan.terms:
            async with self.index.db.session() as s:
                items = await MemoryIndexRepo(s).newest(
                    SearchFilter(user_id, flt.start, flt.end, ("message",), flt.exclude_ids),
                    limit,
                )
            evidence = [Evidence(i, 0.0, "recent") for i in items]
            return await self._finish(plan, evidence, tz)
        about_me = bool(_ABOUT_ME.search(query))
        if plan.window is not None and not plan.terms:
            return await self._finish(plan, await self._window_listing(flt, about_me), tz)
        ranked = await self.hybrid(plan, flt, query)
        if plan.recency:
            # Newest first among what matches; every name asked about must be there.
            if plan.people:
                ranked = [e for e in ranked if _names_in(e.item, plan.people) == len(plan.people)]
            ranked.sort(key=lambda e: (e.item.ts, e.item.id or 0), reverse=True)
            for e in ranked:
                e.matched += "+recent"
        evidence = self._diverse(ranked, limit)
        if not evidence and plan.window is not None:
            # Nothing matched the topic inside the window: show what the window holds
            # (still inside it, never wider) and let the answer judge.
            return await self._finish(plan, await self._window_listing(flt, about_me), tz)
        return await self._finish(plan, evidence, tz)

    async def _excluded(self, user_id: int, message_ids: Sequence[int]) -> list[int]:
        if not message_ids:
            return []
        out = []
        async with self.index.db.session() as s:
            repo = MemoryIndexRepo(s)
            for mid in message_ids:
                item = await repo.by_source("message", mid)
                if item is not None and item.id is not None and item.user_id == user_id:
                    out.append(item.id)
        return out

    async def _window_listing(self, flt: SearchFilter, about_me: bool) -> list[Evidence]:
        """Everything said in the window; the user's own words first for "what did I ..."."""
        assert flt.start is not None
        assert flt.end is not None
        async with self.index.db.session() as s:
            items = await MemoryIndexRepo(s).in_window(
                flt.user_id,
                flt.start,
                flt.end,
                ("message", "journal"),
                4 * self.tuning.window_listing,
            )
        items = [i for i in items if i.id not in flt.exclude_ids]
        if about_me:
            items.sort(key=lambda i: i.speaker.lower() not in OWN_SPEAKERS)  # stable sort
        return [Evidence(i, 0.0, "time") for i in items[: self.tuning.window_listing]]

    async def hybrid(self, plan: QueryPlan, flt: SearchFilter, query: str) -> list[Evidence]:
        """Fused, floored and name-boosted candidates, best first (before diversity)."""
        t = self.tuning
        qvec = await self.index.embed_query(query)
        async with self.index.db.session() as s:
            fts = await self.index.fulltext.search(s, plan.terms, flt, t.candidates)
            vec = []
            if qvec is not None:
                vectors = await self.index.vectors()
                vec = await vectors.search(s, qvec, self.index.embedder.model_id, flt, t.candidates)
            ids = list(dict.fromkeys([i for i, _ in fts] + [i for i, _ in vec]))
            items = await MemoryIndexRepo(s).get_many(flt.user_id, ids)
        fts_rank = {item_id: r for r, (item_id, _) in enumerate(fts, 1)}
        vec_rank = {item_id: r for r, (item_id, _) in enumerate(vec, 1)}
        cosine = dict(vec)
        out: list[Evidence] = []
        for item_id in ids:
            item = items.get(item_id)
            if item is None:
                continue
            in_fts = item_id in fts_rank
            cos = cosine.get(item_id)
            if cos is None and qvec is not None and (v := _vector(item)) is not None:
                cos = float(v @ qvec) if v.shape == qvec.shape else None
            strong = cos is not None and cos >= t.floor
            if not strong and not (in_fts and self._enough_words(item, plan, cos)):
                continue
            score = 0.0
            if in_fts:
                score += t.fts_weight / (t.rrf_k + fts_rank[item_id])
            if item_id in vec_rank:
                score += t.vector_weight / (t.rrf_k + vec_rank[item_id])
            if plan.people:
                score += t.name_boost * _names_in(item, plan.people)
            how = "words+meaning" if in_fts and strong else ("words" if in_fts else "meaning")
            out.append(Evidence(item, score, how))
        out.sort(key=lambda e: e.score, reverse=True)
        return out

    def _enough_words(self, item: MemoryItem, plan: QueryPlan, cos: float | None) -> bool:
        """A full-text hit without a close meaning counts only if it shares enough words.

        One common word ("go") in a long question is how weak matches turn into invented
        answers; two shared words, or the only word asked about, is evidence.
        """
        if cos is not None and cos >= self.tuning.weak_floor:
            return True
        covered = _coverage(item, plan.terms)
        return covered >= 2 or (covered >= 1 and len(plan.terms) == 1)

    def _diverse(self, ranked: list[Evidence], limit: int) -> list[Evidence]:
        """Drop near-duplicates: the same thing said twice is one piece of evidence."""
        kept: list[Evidence] = []
        kept_vecs: list[np.ndarray[tuple[int], np.dtype[np.float32]]] = []
        seen_text: set[str] = set()
        for ev in ranked:
            norm = re.sub(r"\W+", " ", ev.item.text.lower()).strip()
            if norm in seen_text:
                continue
            v = _vector(ev.item)
            if v is not None and any(
                k.shape == v.shape and float(k @ v) >= self.tuning.duplicate for k in kept_vecs
            ):
                continue
            seen_text.add(norm)
            if v is not None:
                kept_vecs.append(v)
            kept.append(ev)
            if len(kept) >= limit:
                break
        return kept

    async def _finish(
        self, plan: QueryPlan, evidence: list[Evidence], tz: ZoneInfo
    ) -> SearchOutcome:
        """Add neighbouring turns, trim to the token budget, and explain an empty result."""
        t = self.tuning
        if t.context_turns:
            async with self.index.db.session() as s:
                repo = MemoryIndexRepo(s)
                for ev in evidence:
                    if ev.matched in ("time", "recent"):
                        continue
                    near = await repo.neighbours(ev.item, t.context_turns, t.context_turns)
                    ev.context = [
                        n for n in near if abs((n.ts - ev.item.ts).total_seconds()) <= 1800
                    ]
        kept: list[Evidence] = []
        used = 0
        for ev in evidence:
            cost = count_tokens(ev.item.text) + sum(count_tokens(c.text) for c in ev.context) + 20
            if kept and used + cost > t.budget_tokens:
                break
            kept.append(ev)
            used += cost
        note = None
        if not kept:
            if plan.window is not None:
                note = (
                    f"Nothing is stored for {plan.window.label} "
                    f"({plan.window.describe(tz)}). Say so; do not widen the search or guess."
                )
            else:
                note = "Nothing relevant is stored. Say you don't know; do not guess."
        elif len(kept) < len(evidence):
            note = f"{len(evidence) - len(kept)} more results were cut to fit the budget."
        return SearchOutcome(plan, kept, note)
