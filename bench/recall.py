"""Evidence recall on real conversations (LoCoMo dev half): ``python -m bench recall``.

Each conversation is imported as one user through ``lifebot import`` (JSON Lines: the turn's
``dia_id`` as its id, the session's date as UTC, turns a minute apart, a shared photo's caption
in brackets), indexed, then every question of categories 1-4 goes through the very search
``lifebot memory search`` and the agent's tool use. Printed: recall@5/@10 overall and per
category for lifebot (with and without its learned stage), a plain BM25 and plain MiniLM
cosine, and lifebot's search latency with and without the learned stage.

The data set stays outside the repository: ``--data`` (default ``../shared/data/locomo-dev``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from bench._bm25 import BM25
from bot.agent.memory.embeddings import MiniLMEmbedder
from bot.agent.memory.service import MemoryService
from bot.agent.retrieval import RetrievalTuning, Retriever
from bot.agent.retrieval.learned import Forest, load_forest
from bot.app.importer import import_file
from bot.clock import SystemClock
from storage.db import Database
from storage.repos.users import UserRepo


def _default_data() -> Path:
    """``shared/data/locomo-dev`` beside the nearest folder above this checkout that has it.

    The main checkout sits at ``/work/main`` and helpers' worktrees one level deeper
    (``/work/wt/<branch>``): both find ``/work/shared``.
    """
    here = Path(__file__).resolve()
    for parent in here.parents[1:]:
        candidate = parent / "shared" / "data" / "locomo-dev"
        if candidate.is_dir():
            return candidate
    return here.parents[2] / "shared" / "data" / "locomo-dev"


DEFAULT_DATA = _default_data()
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
UTC_ZONE = ZoneInfo("UTC")


@dataclass
class Conversation:
    name: str
    records: list[dict[str, str]]
    questions: list[tuple[str, int, list[str]]]
    now: datetime


@dataclass
class Scores:
    hits: dict[tuple[int, int], list[float]] = field(default_factory=dict)

    def add(self, category: int, evidence: list[str], got: list[str]) -> None:
        for k in (5, 10):
            share = sum(e in got[:k] for e in evidence) / len(evidence)
            self.hits.setdefault((0, k), []).append(share)
            self.hits.setdefault((category, k), []).append(share)

    def cell(self, category: int) -> str:
        return f"{np.mean(self.hits[(category, 5)]):.3f} / {np.mean(self.hits[(category, 10)]):.3f}"


def session_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(raw: list[str]) -> list[str]:
    """Evidence ids, malformed ones split ("D8:6; D9:17") or repaired ("D:11:26")."""
    out = []
    for entry in raw:
        for part in re.split(r"[;,\s]+", entry):
            m = re.fullmatch(r"D:?(\d+):(\d+)", part.strip())
            if m:
                out.append(f"D{m.group(1)}:{m.group(2)}")
    return out


def load(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    records: list[dict[str, str]] = []
    n = 1
    while f"session_{n}" in data:
        start = session_time(data[f"session_{n}_date_time"])
        for i, turn in enumerate(data[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            ts = start + timedelta(minutes=i)
            records.append(
                {
                    "id": turn["dia_id"],
                    "ts": ts.isoformat(),
                    "speaker": turn["speaker"],
                    "text": text,
                    "conversation": f"locomo-{path.stem}",
                }
            )
        n += 1
    known = {r["id"] for r in records}
    questions = []
    for q in data["qa"]:
        cat = int(q["category"])
        ev = [e for e in evidence_ids(q.get("evidence", [])) if e in known]
        if cat in CATEGORIES and ev:
            questions.append((str(q["question"]), cat, ev))
    last = max(datetime.fromisoformat(r["ts"]) for r in records)
    return Conversation(path.stem, records, questions, last + timedelta(days=1))


@dataclass
class Imported:
    """One conversation imported as one user, and what the baselines need of it."""

    conv: Conversation
    user_id: int
    bm25: BM25
    refs: list[str]
    """The import id of each corpus item, in corpus order."""
    qvecs: np.ndarray
    """Plain vectors of the questions (the "vectors" baseline)."""
    searched: np.ndarray
    """The vectors search ranks with (``_tune_recall.question_vectors``)."""


async def fold_forests(memory: MemoryService, imported: dict[str, Imported]) -> dict[str, Forest]:
    """Trees trained on every conversation but one, for each one (needs the ``train`` extra).

    Empty when LightGBM is not installed: the leave-one-out row is then left out.
    """
    try:
        import lightgbm  # noqa: F401, PLC0415
    except ImportError:
        return {}
    from bench._train_ranker import build, export, train  # noqa: PLC0415 (circular)
    from bench._tune_recall import ask  # noqa: PLC0415

    corpora = {n: await memory.index.corpus(i.user_id) for n, i in imported.items()}
    asked = [
        a for n, i in imported.items() for a in ask(corpora[n], i.user_id, n, i.conv, i.searched)
    ]
    rows = build(corpora, {n: i.refs for n, i in imported.items()}, asked)
    conv = np.array([a.conversation for a in asked])
    return {held: load_forest(export(train(rows, conv != held))) for held in imported}


async def import_all(
    db: Database,
    memory: MemoryService,
    embedder: MiniLMEmbedder,
    data: Path,
    names: list[str],
    tmp: Path,
) -> dict[str, Imported]:
    """Each conversation imported through ``lifebot import`` as one user, and indexed."""
    from bench._tune_recall import question_vectors  # noqa: PLC0415 (circular)

    imported: dict[str, Imported] = {}
    for name in names:
        conv = load(data / f"{name}.json")
        async with db.session() as s:
            user = await UserRepo(s).create(f"locomo-{name}", timezone="UTC")
        assert user.id is not None
        path = tmp / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in conv.records), encoding="utf-8")
        report = await import_file(db, user.id, path, timezone="UTC")
        await memory.after_import(user.id, report.conversations)
        bm25 = BM25([f"{r['speaker']}: {r['text']}" for r in conv.records])
        corpus = await memory.index.corpus(user.id)
        refs = await _refs(db, user.id, [int(i) for i in corpus.arrays().ids])
        qvecs = embedder.embed_sync([q for q, _, _ in conv.questions])
        searched = question_vectors(embedder, corpus, conv)
        imported[name] = Imported(conv, user.id, bm25, refs, qvecs, searched)
    return imported


def report(scores: dict[str, Scores], questions: int, names: list[str]) -> None:
    """The recall table."""
    print(f"LoCoMo dev ({', '.join(names)}): {questions} questions, categories 1-4, R@5 / R@10")
    print(
        "(in-sample: the shipped trees were trained on these conversations; the leave-one-out "
        "row scores each with trees trained on the other four. BM25 and vectors fit nothing: "
        "their figures are the same either way.)"
    )
    header = ["system", "all", *CATEGORIES.values()]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for system, sc in scores.items():
        cells = [sc.cell(c) for c in (0, *CATEGORIES)]
        print("| " + " | ".join([system, *cells]) + " |")


async def run(data: Path, names: list[str]) -> None:
    embedder = MiniLMEmbedder()
    scores = {
        "lifebot": Scores(),
        "lifebot, leave one conversation out": Scores(),
        "lifebot, no learned stage": Scores(),
        "BM25": Scores(),
        "vectors": Scores(),
    }
    latency: list[float] = []
    latency_first: list[float] = []
    questions = 0
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'recall.db'}")
        await db.migrate()
        memory = MemoryService(db, None, embedder, SystemClock())
        first_stage = Retriever(memory.index, RetrievalTuning(learned=False))
        t0 = time.perf_counter()
        imported = await import_all(db, memory, embedder, data, names, Path(tmp))
        folds = await fold_forests(memory, imported)
        if not folds:
            del scores["lifebot, leave one conversation out"]
        for name, imp in imported.items():
            conv, user_id = imp.conv, imp.user_id
            ids = [r["id"] for r in conv.records]
            corpus = await memory.index.corpus(user_id)
            held_out = Retriever(memory.index, RetrievalTuning(forest=folds.get(name)))
            for (question, cat, evidence), qvec in zip(conv.questions, imp.qvecs, strict=True):
                questions += 1
                t1 = time.perf_counter()
                out = await memory.retriever.search(
                    user_id, question, now=conv.now, tz=UTC_ZONE, limit=10, kinds=("message",)
                )
                latency.append((time.perf_counter() - t1) * 1000)
                scores["lifebot"].add(cat, evidence, [e.item.ref for e in out.evidence])
                t1 = time.perf_counter()
                out = await first_stage.search(
                    user_id, question, now=conv.now, tz=UTC_ZONE, limit=10, kinds=("message",)
                )
                latency_first.append((time.perf_counter() - t1) * 1000)
                scores["lifebot, no learned stage"].add(
                    cat, evidence, [e.item.ref for e in out.evidence]
                )
                if folds:
                    out = await held_out.search(
                        user_id, question, now=conv.now, tz=UTC_ZONE, limit=10, kinds=("message",)
                    )
                    scores["lifebot, leave one conversation out"].add(
                        cat, evidence, [e.item.ref for e in out.evidence]
                    )
                scores["BM25"].add(cat, evidence, [ids[i] for i in imp.bm25.top(question, 10)])
                cosine = corpus.cosine(qvec)
                assert cosine is not None
                near = np.argsort(-cosine)[:10]
                scores["vectors"].add(cat, evidence, [imp.refs[int(i)] for i in near])
        total_s = time.perf_counter() - t0
        await db.dispose()
    report(scores, questions, names)
    for label, times in (("lifebot", latency), ("no learned stage", latency_first)):
        print(
            f"{label} search latency (query embedding included): p50 "
            f"{statistics.median(times):.1f} ms, p95 {np.percentile(times, 95):.1f} ms"
        )
    ratio = statistics.median(latency) / statistics.median(latency_first)
    print(f"learned stage p50 ratio {ratio:.2f}x (same run); whole run {total_s:.0f} s")


async def _refs(db: Database, user_id: int, item_ids: list[int]) -> list[str]:
    """The import id of each corpus item, in corpus order."""
    from storage.repos.memory_index import MemoryIndexRepo  # noqa: PLC0415

    async with db.session() as s:
        items = await MemoryIndexRepo(s).get_many(user_id, item_ids)
    return [items[i].ref for i in item_ids]


def locomo_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments every LoCoMo benchmark takes: ``--data`` and ``--conversations``."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON folder")
    parser.add_argument("--conversations", nargs="+", default=["26", "30", "41", "42", "43"])
    return parser


def main(argv: list[str] | None = None) -> None:
    """Entry point; from ``python -m bench`` (all benchmarks) it runs with the defaults."""
    if argv is None:
        argv = sys.argv[1:] if __name__ == "__main__" else []
    parser = locomo_parser(__doc__)
    args = parser.parse_args(argv)
    missing = [c for c in args.conversations if not (args.data / f"{c}.json").exists()]
    if missing:
        print(f"skipped: no LoCoMo files {missing} in {args.data} (pass --data)")
        return
    asyncio.run(run(args.data, args.conversations))


if __name__ == "__main__":
    main()
