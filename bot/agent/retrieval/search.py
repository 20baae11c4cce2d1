"""Hybrid retrieval: every item of the user scored by words and meaning, then chosen.

Scoring (``rank``): BM25 over neighbouring-turn windows blended with cosine similarity and
smoothed along the conversation. Then: abstention when nothing shares the question's words
or meaning, a relative floor, diversity, neighbouring turns as context, and a token budget.

A time window named in the question is a hard filter and fails closed: when nothing is
stored inside it the outcome says so instead of searching wider.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from bot.agent.budget import count_tokens
from bot.agent.memory.index import MemoryIndex
from bot.agent.retrieval.learned import Forest, shipped_forest
from bot.agent.retrieval.people import known_people
from bot.agent.retrieval.query import QueryPlan, is_known, understand, without_speakers
from bot.agent.retrieval.rank import Ranking, RankTuning, rank
from bot.agent.retrieval.timeparse import OPEN_START, TimeWindow
from storage.models import MemoryItem
from storage.repos.memory_index import OWN_SPEAKERS, MemoryIndexRepo
from storage.search.base import SearchFilter
from storage.search.corpus import Corpus
from storage.search.vectors import KIND_CODES


@dataclass(frozen=True, slots=True)
class RetrievalTuning:
    """The knobs, set from measurements (``python -m bench recall`` and the test corpus)."""

    rank: RankTuning = field(default_factory=RankTuning)
    learned: bool = True
    """Let the shipped trees (``learned``) reorder the first stage's best candidates."""
    forest: Forest | None = None
    """Trees to use instead of the shipped ones (``bench recall``: one per held-out fold)."""
    speaker_free: float = 0.75
    """Share of the question's vector taken from the question without the names of people
    who speak in the memory (``query.without_speakers``; 0 turns it off). Measured leave one
    conversation out on LoCoMo dev: 0.75 and 1.0 both beat 0; 1.0 loses when the rest of the
    question says little."""
    floor: float = 0.38
    """Cosine at or above which an item is evidence on meaning alone."""
    weak_floor: float = 0.2
    """Cosine below which an item sharing no word with the question is not evidence."""
    relative_floor: float = 0.2
    """Hits scoring below this share of the best hit are dropped as weak."""
    duplicate: float = 0.95
    """Cosine above which two hits count as the same thing said twice."""
    recency_strong: float = 0.8
    """A "latest ..." question orders by date the matches scoring this share of the best."""
    budget_tokens: int = 1500
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
    vector: npt.NDArray[np.float32] | None = None
    """The item's vector from the in-memory corpus (hybrid hits only; for de-duplication)."""
    context_loaded: bool = False
    """``context`` was filled with the hit itself (one query for both): not looked up again."""


@dataclass(slots=True)
class SearchOutcome:
    """What a search found, and anything the answer must say about it."""

    plan: QueryPlan
    evidence: list[Evidence]
    note: str | None = None
    """Written for the model ("do not guess"): never shown to a person."""
    said: str | None = None
    """The same in plain words for a person (the web page, the API), when there is one."""


def _mask(corpus: Corpus, flt: SearchFilter) -> npt.NDArray[np.bool_]:
    """Which items the filter lets through (kinds, time window, hidden, excluded)."""
    arr = corpus.arrays()
    mask = ~arr.hidden & np.isin(arr.kinds, [KIND_CODES[k] for k in flt.kinds])
    if flt.start is not None or flt.end is not None:
        # Said inside the window, or said later about a time inside it ("yesterday").
        lo = flt.start.timestamp() if flt.start is not None else -np.inf
        hi = flt.end.timestamp() if flt.end is not None else np.inf
        said = (arr.ts >= lo) & (arr.ts < hi)
        with np.errstate(invalid="ignore"):
            about = (arr.mentioned[0] < hi) & (arr.mentioned[1] > lo)
        mask &= said | about
    if flt.exclude_ids:
        mask &= ~np.isin(arr.ids, np.fromiter(flt.exclude_ids, dtype=np.int64))
    return mask


def mix(
    asked: npt.NDArray[np.float32], bare: npt.NDArray[np.float32], share: float
) -> npt.NDArray[np.float32]:
    """The unit vector ``(1 - share) * asked + share * bare`` (the two vectors of a question)."""
    out = (1.0 - share) * asked.astype(np.float32) + share * bare.astype(np.float32)
    norm = float(np.linalg.norm(out))
    mixed: npt.NDArray[np.float32] = (out / norm if norm > 0 else asked).astype(np.float32)
    return mixed


def _sessions_with(corpus: Corpus, names: Sequence[str]) -> dict[str, set[int]]:
    """For each name, the sessions in which a speaker of that name (or short form) speaks."""
    arr = corpus.arrays()
    out: dict[str, set[int]] = {}
    for name in names:
        codes = [c for s, c in corpus.speaker_names.items() if is_known(name, [s])]
        if codes:
            out[name] = {int(x) for x in np.unique(arr.session[np.isin(arr.speaker, codes)])}
    return out


def _names_in(
    item: MemoryItem,
    names: Sequence[str],
    corpus: Corpus | None = None,
    present: dict[str, set[int]] | None = None,
) -> int:
    """How many of ``names`` the item's speaker or text mentions, or who take part in its talk.

    "What did Joanna recommend to Nate?" is answered by Joanna's turn in a talk with Nate,
    which need not say his name: a person who speaks in the item's session counts as named.
    """
    hay = f"{item.speaker} {item.text}".lower()
    session = None
    if corpus is not None and present and item.id is not None:
        pos = corpus.position(item.id)
        session = None if pos is None else int(corpus.arrays().session[pos])
    return sum(
        1
        for n in names
        if re.search(rf"\b{re.escape(n.lower())}\b", hay)
        or (session is not None and session in (present or {}).get(n, set()))
    )


_ABOUT_ME = re.compile(r"\b(I|me|my|mine)\b")


_EVENT_RELATIONS = frozenset({"after", "since", "before"})
"""How a question ties a time to an event ("after the move"); other ties stay undated."""


def _undated(outcome: SearchOutcome) -> SearchOutcome:
    """A topic search whose time words named no date: the answer must say so."""
    plan = outcome.plan
    cannot = f"I can't turn '{plan.unresolved}' into dates"
    if not outcome.evidence:
        said = f"{cannot}, and nothing on the topic is stored."
        note = f"{said} Tell the user that; do not guess."
        return SearchOutcome(plan, outcome.evidence, note, said)
    note = (
        f"{cannot}, so these were found by topic alone, in any time: check each one's date "
        "against it before answering, and say so if it cannot be told."
    )
    if outcome.note:
        note += " " + outcome.note
    said = f"{cannot}, so these were found by topic alone, in any time."
    return SearchOutcome(plan, outcome.evidence, note, said)


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
        kinds: tuple[str, ...] = ("message", "episode", "fact", "journal", "image", "document"),
        exclude_message_ids: Sequence[int] = (),
    ) -> SearchOutcome:
        """Search; see the module doc for the steps."""
        plan = understand(query, now, tz, start=start, end=end, people=people)
        if plan.unresolved and plan.window is None:
            # An undatable time ("after the move"): first date the event from what was said
            # about it, and search the topic on the right side of that day; failing that, it
            # is a soft hint, not a filter: the topic is searched in any time, and the answer
            # is told the time could not be checked.
            dated = await self._after_dated_event(
                user_id, plan, query, now, tz, limit, kinds, exclude_message_ids
            )
            if dated is not None:
                return dated
            outcome = await self._search(
                user_id, plan, query, tz, limit, kinds, exclude_message_ids
            )
            return _undated(outcome)
        return await self._search(user_id, plan, query, tz, limit, kinds, exclude_message_ids)

    async def _after_dated_event(
        self,
        user_id: int,
        plan: QueryPlan,
        query: str,
        now: datetime,
        tz: ZoneInfo,
        limit: int,
        kinds: tuple[str, ...],
        exclude_message_ids: Sequence[int],
    ) -> SearchOutcome | None:
        """Date "the move" by the best turn about it, then search the topic beside that day.

        "after/since the move" searches from the day of the turn that talks about the move
        most, "before the move" up to it; the topic's own words (the event's left out) rank
        the hits. None when the event cannot be found or nothing of the topic is on the
        right side of it (the caller falls back to the topic in any time).
        """
        relation = (plan.unresolved or "").split(" ", 1)[0].lower()
        event_words = set(plan.event.split())
        if relation not in _EVENT_RELATIONS or not event_words:
            return None
        event_plan = replace(plan, terms=[t for t in plan.terms if t in event_words], event="")
        if not event_plan.terms:
            return None
        about = await self._search(
            user_id, event_plan, plan.event, tz, 1, ("message", "journal"), exclude_message_ids
        )
        if not about.evidence or about.evidence[0].matched == "time":
            return None
        marker = about.evidence[0].item
        day = marker.ts.astimezone(tz).replace(hour=0, minute=0, second=0, microsecond=0)
        if relation == "before":
            window = TimeWindow(OPEN_START, day, plan.unresolved or "", open_start=True)
        else:
            window = TimeWindow(day, now, plan.unresolved or "")
        topic = [t for t in plan.terms if t not in event_words]
        topic_plan = replace(plan, terms=topic, window=window, unresolved=None, event="")
        # The turn that dated the event is not an answer to what happened beside it.
        skip = [*exclude_message_ids, *([marker.source_id] if marker.kind == "message" else [])]
        found = await self._search(user_id, topic_plan, query, tz, limit, kinds, skip)
        found.evidence = [e for e in found.evidence if e.item.id != marker.id]
        if not found.evidence:
            return None
        when = f"{marker.ts.astimezone(tz):%a %d %b %Y}"
        said = (
            f"I read '{plan.unresolved}' as {relation} {when}, when you said "
            f"\u201c{marker.text[:80]}\u201d."
        )
        note = f"{said} If that is not the event meant, say so rather than guess."
        if found.note:
            note += " " + found.note
        return SearchOutcome(topic_plan, found.evidence, note, said)

    async def _search(
        self,
        user_id: int,
        plan: QueryPlan,
        query: str,
        tz: ZoneInfo,
        limit: int,
        kinds: tuple[str, ...],
        exclude_message_ids: Sequence[int],
    ) -> SearchOutcome:
        """The search of ``search`` once the question is understood."""
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
        ranked = await self.hybrid(plan, flt, query, limit)
        if plan.recency:
            # Newest first among what matches; every name asked about must be there.
            # Only strong matches are reordered: a weak one that happens to be newer is a
            # different topic, not a later word on this one.
            ranked = [e for e in ranked if e.matched != "context"]
            if plan.people:
                # Only names the user's memory knows filter; "Biscuit or Pepper" never does.
                corpus = await self.index.corpus(user_id)
                known = await known_people(self.index.db, user_id, corpus.speaker_names)
                must = [p for p in plan.people if is_known(p, known)]
                present = _sessions_with(corpus, must)
                ranked = [
                    e for e in ranked if _names_in(e.item, must, corpus, present) == len(must)
                ]
            best = ranked[0].score if ranked else 0.0
            strong = [e for e in ranked if e.score >= self.tuning.recency_strong * best]
            strong.sort(key=lambda e: (e.item.ts, e.item.id or 0), reverse=True)
            ranked = strong + [e for e in ranked if e.score < self.tuning.recency_strong * best]
            for e in strong:
                e.matched += "+recent"
        evidence = self._diverse(ranked, limit)
        if not evidence and plan.window is not None:
            # Nothing inside the window is evidence on its own: show what the window holds
            # (still inside it, never wider), closest to the question first, and let the
            # answer judge. The window itself is the signal that these items matter.
            return await self._finish(
                plan, await self._window_ranked(plan, flt, query, about_me), tz
            )
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

    async def _window_ranked(
        self, plan: QueryPlan, flt: SearchFilter, query: str, about_me: bool
    ) -> list[Evidence]:
        """What the window holds, the items closest to the question first.

        Used when nothing in the window passes the evidence floors: the order in time says
        nothing about the question, so a month's listing would show its first days.
        """
        listing = await self._window_listing(flt, about_me)
        closest = await self.hybrid(plan, flt, query, self.tuning.window_listing, strict=False)
        first = [Evidence(e.item, e.score, "time") for e in self._diverse(closest, len(closest))]
        seen = {e.item.id for e in first}
        rest = [e for e in listing if e.item.id not in seen]
        return (first + rest)[: self.tuning.window_listing]

    async def _window_listing(self, flt: SearchFilter, about_me: bool) -> list[Evidence]:
        """Everything said in the window; the user's own words first for "what did I ..."."""
        assert flt.start is not None
        assert flt.end is not None
        async with self.index.db.session() as s:
            items = await MemoryIndexRepo(s).in_window(
                flt.user_id,
                flt.start,
                flt.end,
                ("message", "journal", "image"),
                4 * self.tuning.window_listing,
            )
        items = [i for i in items if i.id not in flt.exclude_ids]
        if about_me:
            items.sort(key=lambda i: i.speaker.lower() not in OWN_SPEAKERS)  # stable sort
        return [Evidence(i, 0.0, "time") for i in items[: self.tuning.window_listing]]

    async def hybrid(
        self,
        plan: QueryPlan,
        flt: SearchFilter,
        query: str,
        limit: int = 10,
        *,
        strict: bool = True,
    ) -> list[Evidence]:
        """Candidates best first (before diversity); empty when nothing is evidence.

        ``strict=False`` ranks whatever the filter lets through, evidence or not (the
        items of a named time window).
        """
        # Both may be cold (model not loaded, corpus not tokenised): overlap them. Who speaks
        # is read from the corpus as last loaded, so the speaker-free copy of the question
        # is embedded in the same model call.
        loaded = self.index.corpora.loaded(flt.user_id)
        bare = self._without_speakers(loaded, plan, query) if loaded is not None else None
        texts = [query] if bare is None else [query, bare]
        qvecs, corpus = await asyncio.gather(
            self.index.embed_queries(texts), self.index.corpus(flt.user_id)
        )
        qvec = await self._speaker_free(qvecs, bare, corpus, plan, query)
        # Scoring every item is CPU work: off the event loop.
        chosen = await asyncio.to_thread(self._choose, corpus, plan, qvec, flt, 2 * limit, strict)
        if not chosen:
            return []
        # The hits and the turns around them in one query (not one for each).
        around = {i: self._neighbours(corpus, i) for i, _, _ in chosen}
        wanted = {i for i, _, _ in chosen} | {n for lst in around.values() for n in lst}
        async with self.index.db.session() as s:
            items = await MemoryIndexRepo(s).get_many(flt.user_id, sorted(wanted), vectors=False)
        out = [Evidence(items[i], score, how) for i, score, how in chosen if i in items]
        for ev in out:
            ev.vector = corpus.vector(ev.item.id or 0)
            ev.context = [items[n] for n in around[ev.item.id or 0] if n in items]
            ev.context_loaded = True
        return out

    def _without_speakers(self, corpus: Corpus, plan: QueryPlan, query: str) -> str | None:
        """The question without the names of people who speak in ``corpus`` (or None)."""
        if self.tuning.speaker_free <= 0:
            return None
        return without_speakers(query, (*plan.people, *plan.candidates), corpus.speaker_names)

    async def _speaker_free(
        self,
        qvecs: list[npt.NDArray[np.float32]] | None,
        bare: str | None,
        corpus: Corpus,
        plan: QueryPlan,
        query: str,
    ) -> npt.NDArray[np.float32] | None:
        """The question's vector, mixed with that of the question without its speakers' names.

        ``qvecs`` holds the question's vector and, when ``bare`` (the copy made from the
        corpus as last loaded) is set, the copy's. One more short embedding only when the
        names who speak changed since (or the corpus was not loaded yet); the names still
        count through the words and the speaker bonus.
        """
        if qvecs is None:
            return None
        qvec = qvecs[0]
        now = self._without_speakers(corpus, plan, query)
        if now is None:
            return qvec
        if now == bare:
            other: npt.NDArray[np.float32] | None = qvecs[1]
        else:
            other = await self.index.embed_query(now)
        return qvec if other is None else mix(qvec, other, self.tuning.speaker_free)

    def _neighbours(self, corpus: Corpus, item_id: int) -> list[int]:
        """Ids of the turns just before and after an item in its session."""
        pos = corpus.position(item_id)
        # None: not there; 0: the very first item, which never had context (kept as it was).
        if not self.tuning.context_turns or not pos:
            return []
        arr = corpus.arrays()
        n = len(arr.ids)
        rows = [1, 2] if self.tuning.context_turns == 1 else [0, 1, 2, 3]
        return [int(arr.ids[p]) for p in (int(arr.near[r, pos]) for r in rows) if p < n]

    def _choose(
        self,
        corpus: Corpus,
        plan: QueryPlan,
        qvec: npt.NDArray[np.float32] | None,
        flt: SearchFilter,
        pool: int,
        strict: bool = True,
    ) -> list[tuple[int, float, str]]:
        """(item id, score, how it matched) of the best items, or nothing without evidence."""
        t = self.tuning
        arr = corpus.arrays()
        mask = _mask(corpus, flt)
        if not mask.any():
            return []
        people = {p.lower() for p in (*plan.people, *plan.candidates)}
        # A short form names the speaker too ("Mel" for Melanie).
        speakers = [
            code
            for name, code in corpus.speaker_names.items()
            if any(name == p or (len(p) >= 3 and name.startswith(p)) for p in people)
        ]
        terms = plan.weighted
        forest = (t.forest or shipped_forest()) if t.learned else None
        ranking = rank(
            corpus,
            terms,
            qvec,
            mask,
            speakers,
            t.rank,
            forest,
            question=plan.text,
            names=plan.people,
        )
        topic = len([w for w in terms if w[1] >= 1.0])
        if strict and not self._has_evidence(ranking, mask, topic):
            return []
        pool = min(int(mask.sum()), pool)
        top = np.argpartition(-ranking.scores, pool - 1)[:pool]
        top = top[np.argsort(-ranking.scores[top], kind="stable")]
        best = float(ranking.scores[top[0]])
        out = []
        for pos in top:
            score = float(ranking.scores[pos])
            if strict and score < t.relative_floor * best:
                break
            words = ranking.coverage[pos] > 0
            cos = float(ranking.cosine[pos]) if ranking.cosine is not None else 0.0
            if strict and not words and cos < t.weak_floor:
                continue  # only near something relevant: context, not evidence
            meaning = cos >= t.floor
            how = "words+meaning" if words and meaning else (
                "words" if words else ("meaning" if meaning else "context"))  # fmt: skip
            out.append((int(arr.ids[pos]), score, how))
        return out

    def _has_evidence(self, ranking: Ranking, mask: npt.NDArray[np.bool_], topic: int) -> bool:
        """Something is close in meaning, or shares enough of the question's words.

        One common word ("go") in a long question is how weak matches turn into invented
        answers; two shared words, or the only word asked about, is evidence.
        """
        if ranking.cosine is not None and float(ranking.cosine[mask].max()) >= self.tuning.floor:
            return True
        need = 1 if topic <= 1 else 2
        return bool(topic) and int(ranking.coverage[mask].max()) >= need

    def _diverse(self, ranked: list[Evidence], limit: int) -> list[Evidence]:
        """Drop near-duplicates: the same thing said twice is one piece of evidence."""
        kept: list[Evidence] = []
        kept_vecs: list[npt.NDArray[np.float32]] = []
        seen_text: set[str] = set()
        for ev in ranked:
            norm = re.sub(r"\W+", " ", ev.item.text.lower()).strip()
            if norm in seen_text:
                continue
            v = ev.vector
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

    async def _add_context(self, user_id: int, evidence: list[Evidence]) -> None:
        """The turns just before and after each hit in its session (one query for all)."""
        todo = [ev for ev in evidence if not ev.context_loaded]
        if not todo:
            return
        corpus = await self.index.corpus(user_id)
        around = {ev.item.id or 0: self._neighbours(corpus, ev.item.id or 0) for ev in todo}
        ids = sorted({i for lst in around.values() for i in lst})
        async with self.index.db.session() as s:
            items = await MemoryIndexRepo(s).get_many(user_id, ids, vectors=False)
        for ev in todo:
            ev.context = [items[i] for i in around[ev.item.id or 0] if i in items]
            ev.context_loaded = True

    async def _finish(
        self, plan: QueryPlan, evidence: list[Evidence], tz: ZoneInfo
    ) -> SearchOutcome:
        """Add neighbouring turns, trim to the token budget, and explain an empty result."""
        t = self.tuning
        wanted = [ev for ev in evidence if ev.matched not in ("time", "recent")]
        if t.context_turns and wanted:
            await self._add_context(wanted[0].item.user_id, wanted)
        # Within the budget: evidence first, best first; then context turns while room is left.
        kept: list[Evidence] = []
        used = 0
        for ev in evidence:
            cost = count_tokens(ev.item.text) + 20
            if kept and used + cost > t.budget_tokens:
                break
            kept.append(ev)
            used += cost
        for ev in kept:
            context_cost = sum(count_tokens(c.text) for c in ev.context)
            if used + context_cost > t.budget_tokens:
                ev.context = []
            else:
                used += context_cost
        note = said = None
        if not kept:
            if plan.window is not None:
                said = f"Nothing is stored for {plan.window.label} ({plan.window.describe(tz)})."
                note = f"{said} Say so; do not widen the search or guess."
            else:
                said = "Nothing in your memory matches that."
                note = "Nothing relevant is stored. Say you don't know; do not guess."
        elif len(kept) < len(evidence):
            note = f"{len(evidence) - len(kept)} more results were cut to fit the budget."
        return SearchOutcome(plan, kept, note, said)
