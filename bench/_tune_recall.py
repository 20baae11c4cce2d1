"""Tune the ranking weights on LoCoMo dev, checked leave-one-conversation-out.

``python -m bench._tune_recall`` (not part of ``make bench``: it takes minutes). Each
conversation is imported through the real path once; then coordinate descent over a small
grid of ``RankTuning`` fields (and the weight of time words in "when" questions) picks the
weights that maximise R@5 + R@10 on four conversations, and the fifth is scored with them, in
turn. Printed: the per-fold weights and figures, the pooled leave-one-out R@5/R@10, and the
weights tuned on all five (the ones to ship when they agree with the folds). It scores the
ranking alone (no abstention or recency ordering), so its figures can sit slightly above
``bench recall``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

import bot.agent.retrieval.query as query_rules
from bench.recall import DEFAULT_DATA, UTC_ZONE, Conversation, _refs, load
from bot.agent.memory.embeddings import MiniLMEmbedder, Vectors
from bot.agent.memory.service import MemoryService
from bot.agent.retrieval.query import QueryPlan, understand, without_speakers
from bot.agent.retrieval.rank import RankTuning, rank
from bot.agent.retrieval.search import RetrievalTuning, _mask, mix
from bot.app.importer import import_file
from bot.clock import SystemClock
from storage.db import Database
from storage.repos.users import UserRepo
from storage.search.base import SearchFilter
from storage.search.corpus import Corpus

GRID: dict[str, list[float]] = {
    "k1": [0.2, 0.3, 0.4, 0.6, 0.9],
    "b": [0.1, 0.2, 0.3, 0.45, 0.6],
    "dense": [0.4, 0.5, 0.6, 0.7],
    "w2": [0.0, 0.25, 0.5, 0.75],
    "a1": [0.0, 0.05, 0.1, 0.2, 0.3],
    "a2": [0.0, 0.05, 0.1],
    "session": [0.1, 0.2, 0.25, 0.35, 0.5],
    "speaker": [0.0, 0.05, 0.1, 0.2],
    "time_words": [0.1, 0.2, 0.3, 0.5],
}
Config = dict[str, float]


class BenchEmbedder(Protocol):
    """What the bench needs of an embedder: the runtime port plus a blocking call.

    A model that embeds questions differently from passages (e5's "query: " prefix) also has
    ``embed_queries_sync``; ``question_vectors`` uses it when it is there.
    """

    model_id: str
    """Stored next to every vector (see ``bot.agent.memory.embeddings.Embedder``)."""

    def embed_sync(self, texts: list[str]) -> Vectors:
        """Embed passages in the calling thread."""
        ...

    async def embed(self, texts: list[str]) -> Vectors:
        """Embed passages from async code."""
        ...


@dataclass
class Asked:
    """One question, ready to be ranked many times."""

    conversation: str
    plan: QueryPlan
    qvec: npt.NDArray[np.float32]
    mask: npt.NDArray[np.bool_]
    speakers: list[int]
    evidence: list[str]
    category: int = 0
    """LoCoMo's question category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)."""


def start_config() -> Config:
    """The shipped weights, as a grid point."""
    t = RankTuning()
    return {
        "k1": t.k1,
        "b": t.b,
        "dense": t.dense,
        "w2": t.window[1],
        "a1": t.near[0],
        "a2": t.near[1],
        "session": t.session,
        "speaker": t.speaker,
        "time_words": query_rules.TIME_WORD_WEIGHT,
    }


def query_embedder(embedder: BenchEmbedder) -> Callable[[list[str]], Vectors]:
    """The call that embeds questions: ``embed_queries_sync`` when the model has one."""
    found: Callable[[list[str]], Vectors] = getattr(
        embedder, "embed_queries_sync", embedder.embed_sync
    )
    return found


def question_vectors(
    embedder: BenchEmbedder, corpus: Corpus, conv: Conversation
) -> npt.NDArray[np.float32]:
    """The vector search ranks each question with (``Retriever._speaker_free``), in one batch."""
    questions = [q for q, _, _ in conv.questions]
    embed = query_embedder(embedder)
    out = embed(questions)
    share = RetrievalTuning().speaker_free
    bare: dict[int, str] = {}
    for i, q in enumerate(questions):
        plan = understand(q, conv.now, UTC_ZONE)
        text = without_speakers(q, (*plan.people, *plan.candidates), corpus.speaker_names)
        if text is not None and share > 0:
            bare[i] = text
    if bare:
        others = embed(list(bare.values()))
        for i, other in zip(bare, others, strict=True):
            out[i] = mix(out[i], other, share)
    return out


def ask(
    corpus: Corpus,
    user_id: int,
    name: str,
    conv: Conversation,
    qvecs: npt.NDArray[np.float32],
) -> list[Asked]:
    """Every question of one imported conversation, ready to be ranked (as search would)."""
    out = []
    for (question, category, evidence), qvec in zip(conv.questions, qvecs, strict=True):
        plan = understand(question, conv.now, UTC_ZONE)
        window = plan.window
        flt = SearchFilter(
            user_id,
            window.start if window else None,
            window.end if window else None,
            ("message",),
            frozenset(),
        )
        # As ``Retriever._choose`` does: names offered as alternatives count as speakers too.
        people = {p.lower() for p in (*plan.people, *plan.candidates)}
        speakers = [
            code
            for who, code in corpus.speaker_names.items()
            if any(who == p or (len(p) >= 3 and who.startswith(p)) for p in people)
        ]
        out.append(Asked(name, plan, qvec, _mask(corpus, flt), speakers, evidence, category))
    return out


async def prepare(
    data: Path, names: list[str], embedder: BenchEmbedder | None = None
) -> tuple[dict[str, Corpus], dict[str, list[str]], list[Asked]]:
    """Import every conversation; each corpus, its import ids, and every question.

    ``embedder``: the model that embeds turns and questions (the shipped MiniLM by default;
    ``bench.embedders`` passes candidates).
    """
    embedder = embedder or MiniLMEmbedder()
    corpora: dict[str, Corpus] = {}
    refs: dict[str, list[str]] = {}
    asked: list[Asked] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'tune.db'}")
        await db.migrate()
        memory = MemoryService(db, None, embedder, SystemClock())
        for name in names:
            conv = load(data / f"{name}.json")
            async with db.session() as s:
                user = await UserRepo(s).create(f"locomo-{name}", timezone="UTC")
            assert user.id is not None
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("\n".join(json.dumps(r) for r in conv.records), encoding="utf-8")
            report = await import_file(db, user.id, path, timezone="UTC")
            await memory.after_import(user.id, report.conversations)
            corpus = await memory.index.corpus(user.id)
            corpora[name] = corpus
            refs[name] = await _refs(db, user.id, [int(i) for i in corpus.arrays().ids])
            qvecs = question_vectors(embedder, corpus, conv)
            asked.extend(ask(corpus, user.id, name, conv, qvecs))
        await db.dispose()
    return corpora, refs, asked


class Trials:
    """Recall of every question under a configuration, computed once per configuration."""

    def __init__(
        self, corpora: dict[str, Corpus], refs: dict[str, list[str]], asked: list[Asked]
    ) -> None:
        self.corpora, self.refs, self.asked = corpora, refs, asked
        self._memo: dict[tuple[tuple[str, float], ...], npt.NDArray[np.float64]] = {}

    def per_question(self, cfg: Config) -> npt.NDArray[np.float64]:
        """Shape (questions, 2): recall@5 and recall@10 of each question."""
        key = tuple(sorted(cfg.items()))
        got = self._memo.get(key)
        if got is not None:
            return got
        tuning = replace(
            RankTuning(),
            k1=cfg["k1"],
            b=cfg["b"],
            dense=cfg["dense"],
            window=(1.0, cfg["w2"]),
            near=(cfg["a1"], cfg["a2"]),
            session=cfg["session"],
            speaker=cfg["speaker"],
        )
        query_rules.TIME_WORD_WEIGHT = cfg["time_words"]
        out = np.zeros((len(self.asked), 2))
        for i, a in enumerate(self.asked):
            corpus = self.corpora[a.conversation]
            scores = rank(corpus, a.plan.weighted, a.qvec, a.mask, a.speakers, tuning).scores
            top = np.argsort(-scores, kind="stable")[:10]
            refs = self.refs[a.conversation]
            found = [refs[int(p)] for p in top]
            for j, k in enumerate((5, 10)):
                out[i, j] = sum(e in found[:k] for e in a.evidence) / len(a.evidence)
        self._memo[key] = out
        return out

    def score(self, cfg: Config, names: set[str]) -> npt.NDArray[np.float64]:
        """Mean recall@5 and @10 over the questions of ``names``."""
        rows = [a.conversation in names for a in self.asked]
        result: npt.NDArray[np.float64] = self.per_question(cfg)[np.asarray(rows)].mean(axis=0)
        return result

    def descend(self, names: set[str], passes: int = 2) -> Config:
        """Coordinate descent from the shipped weights, maximising R@5 + R@10."""
        cfg = start_config()
        best = float(self.score(cfg, names).sum())
        for _ in range(passes):
            moved = False
            for param, values in GRID.items():
                for v in values:
                    trial = {**cfg, param: v}
                    s = float(self.score(trial, names).sum())
                    if s > best + 1e-9:
                        best, cfg, moved = s, trial, True
            if not moved:
                break
        return cfg


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON folder")
    parser.add_argument("--conversations", nargs="+", default=["26", "30", "41", "42", "43"])
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    names: list[str] = args.conversations
    trials = Trials(*asyncio.run(prepare(args.data, names)))
    held_out = np.zeros((len(trials.asked), 2))
    for held in names:
        cfg = trials.descend(set(names) - {held})
        rows = np.asarray([a.conversation == held for a in trials.asked])
        held_out[rows] = trials.per_question(cfg)[rows]
        r5, r10 = trials.score(cfg, {held})
        print(f"held out {held}: R@5 {r5:.3f} R@10 {r10:.3f} with {cfg}")
    r5, r10 = held_out.mean(axis=0)
    print(f"leave-one-conversation-out (pooled): R@5 {r5:.3f} R@10 {r10:.3f}")
    cfg = trials.descend(set(names))
    r5, r10 = trials.score(cfg, set(names))
    print(f"tuned on all five: R@5 {r5:.3f} R@10 {r10:.3f} with {cfg}")
    s5, s10 = trials.score(start_config(), set(names))
    print(f"shipped weights: R@5 {s5:.3f} R@10 {s10:.3f}")


if __name__ == "__main__":
    main()
