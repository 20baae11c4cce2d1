"""Library bake-off for the search stages we wrote ourselves: ``python -m bench libraries``.

On LoCoMo's dev half (the conversations ``bench recall`` uses), each stage against maintained
libraries, measured in one run on the same data:

- BM25: ours (``rank.bm25``, windows off: plain Okapi over each turn) against ``bm25s``,
  ``tantivy`` and SQLite FTS5's ``bm25()``, each with its own English analysis. Recall of
  the evidence turns at 5 and 10, build time, query latency, index size.
- Tree evaluation of the learned ranking: ours (NumPy, ``learned.Forest``) against LightGBM's
  own predictor, treelite's GTIL and onnxruntime (the trees written as an ONNX
  ``TreeEnsembleRegressor``). Agreement with LightGBM and latency for one question's 50
  candidates. Trees trained here with the trainer's parameters on the dev candidates.
- Vector scan: ours (``Corpus.cosine``: int8 rows widened 256 at a time) against ``usearch``
  (exact scan and HNSW) and ``hnswlib`` (HNSW), at the dev corpus size and at ``--rows``
  (30,000 by default: building an HNSW index of 100,000 takes minutes on two cores).
  Recall of the exact top 10 and latency.

Install size is what the package and the dependencies it adds beyond lifebot's own take on
disk. A library that is not installed is skipped with a note (``pip install -e '.[bench]'``
installs them all). Timing is noisy on a shared machine: compare within one run.
"""

from __future__ import annotations

import asyncio
import importlib.metadata as md
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.recall import Imported, import_all, locomo_parser
from bot.agent.memory.embeddings import MiniLMEmbedder
from bot.agent.memory.service import MemoryService
from bot.agent.retrieval.learned import load_forest
from bot.agent.retrieval.rank import RankTuning, bm25
from bot.clock import SystemClock
from storage.db import Database
from storage.search.analysis import analyse
from storage.search.corpus import Corpus, _Staged

Row = list[str]


def _ms(fn: Callable[[], object], repeat: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) * 1000 / repeat


def _runtime_closure() -> set[str]:
    """Distributions lifebot installs at run time (no extras), lower-cased."""
    seen: set[str] = set()
    todo = ["lifebot"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for r in reqs:
            if "extra ==" in r:
                continue
            dep = re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0].lower().replace("_", "-")
            todo.append(dep)
    return seen


def install_mb(name: str, have: set[str]) -> str:
    """Size on disk of ``name`` and the dependencies it adds beyond ``have``."""
    total = 0.0
    added = []
    todo = [name]
    seen: set[str] = set()
    while todo:
        dist_name = todo.pop()
        key = dist_name.lower().replace("_", "-")
        if key in seen or (key in have and dist_name != name):
            continue
        seen.add(key)
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            continue
        total += sum((f.size or 0) for f in dist.files or []) / 1e6
        if dist_name != name:
            added.append(dist_name)
        todo.extend(
            re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]
            for r in dist.requires or []
            if "extra ==" not in r
        )
    extra = f" (with {', '.join(sorted(added))})" if added else ""
    return f"{total:.1f} MB{extra}"


def _recall(evidence: list[str], got: list[str], k: int) -> float:
    return sum(e in got[:k] for e in evidence) / len(evidence)


class Table:
    """Rows printed as one Markdown table."""

    def __init__(self, title: str, header: Row) -> None:
        self.title, self.header = title, header
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def print(self) -> None:
        print(f"\n{self.title}")
        print("| " + " | ".join(self.header) + " |")
        print("|" + "---|" * len(self.header))
        for row in self.rows:
            print("| " + " | ".join(row) + " |")


# --- BM25 -------------------------------------------------------------------------------


def bake_bm25(imported: dict[str, Imported], corpora: dict[str, Corpus], have: set[str]) -> None:
    """Plain BM25 over the turns of each conversation, every engine with its own analysis."""
    table = Table(
        "BM25 (plain, one turn = one document; LoCoMo dev, 760 questions)",
        ["engine", "R@5 / R@10", "build (all 5)", "query p50", "index", "install"],
    )
    engines: dict[str, Callable[[Imported, Corpus], tuple[Callable[[str], list[str]], int]]] = {
        "lifebot (rank.bm25, k1 1.2 b .75, windows off)": _ours_bm25,
        "bm25s 0.3": _bm25s,
        "tantivy 0.27": _tantivy,
        "SQLite FTS5 bm25()": _fts5,
    }
    for label, make in engines.items():
        try:
            r5, r10, times, size = [], [], [], 0
            t0 = time.perf_counter()
            searchers = {}
            for name, imp in imported.items():
                search, nbytes = make(imp, corpora[name])
                searchers[name] = search
                size += nbytes
            build_s = time.perf_counter() - t0
            for name, imp in imported.items():
                for question, _, evidence in imp.conv.questions:
                    t1 = time.perf_counter()
                    got = searchers[name](question)
                    times.append((time.perf_counter() - t1) * 1000)
                    r5.append(_recall(evidence, got, 5))
                    r10.append(_recall(evidence, got, 10))
        except ImportError as exc:
            table.add([label, f"not installed ({exc.name})", "", "", "", ""])
            continue
        dist = {"bm25s": "bm25s", "tantivy": "tantivy"}.get(label.split()[0], "")
        table.add(
            [
                label,
                f"{np.mean(r5):.3f} / {np.mean(r10):.3f}",
                f"{build_s * 1000:.0f} ms" if build_s > 0.001 else "with the corpus load",
                f"{statistics.median(times):.2f} ms",
                f"{size / 1e6:.2f} MB",
                install_mb(dist, have) if dist else "none (ours / stdlib)",
            ]
        )
    table.print()
    print(
        "Ours is the only one that scores every turn with its neighbours' words (windows) and "
        "reports per-turn coverage, which the blend and the learned stage read; the others "
        "return a top k of plain BM25."
    )


def _ours_bm25(imp: Imported, corpus: Corpus) -> tuple[Callable[[str], list[str]], int]:
    arr = corpus.arrays()
    plain = RankTuning(k1=1.2, b=0.75, window=(0.0, 0.0))
    messages = arr.kinds == 0

    def search(q: str) -> list[str]:
        terms = [(t, 1.0) for t in dict.fromkeys(analyse(q))]
        scores, _ = bm25(corpus, terms, plain)
        scores = np.where(messages, scores, -np.inf)
        top = np.argsort(-scores, kind="stable")[:10]
        return [imp.refs[int(i)] for i in top]

    p = corpus._postings
    return search, int(p.docs.nbytes + p.tfs.nbytes + p.offsets.nbytes + p.tail_docs.nbytes)


def _bm25s(imp: Imported, corpus: Corpus) -> tuple[Callable[[str], list[str]], int]:
    import bm25s  # noqa: PLC0415 (optional)
    import Stemmer  # noqa: PLC0415

    stemmer = Stemmer.Stemmer("english")
    docs = [f"{r['speaker']}: {r['text']}" for r in imp.conv.records]
    ids = [r["id"] for r in imp.conv.records]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    size = sum(np.asarray(v).nbytes for v in retriever.scores.values() if hasattr(v, "nbytes"))

    def search(q: str) -> list[str]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        res, _ = retriever.retrieve(tokens, k=min(10, len(docs)), show_progress=False)
        return [ids[int(i)] for i in res[0]]

    return search, size


def _tantivy(imp: Imported, corpus: Corpus) -> tuple[Callable[[str], list[str]], int]:
    import tantivy  # noqa: PLC0415 (optional)

    schema = (
        tantivy.SchemaBuilder()
        .add_text_field("body", stored=False, tokenizer_name="en_stem")
        .add_text_field("ref", stored=True, tokenizer_name="raw")
        .build()
    )
    folder = tempfile.mkdtemp(prefix="tantivy-")
    index = tantivy.Index(schema, path=folder)
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for r in imp.conv.records:
        writer.add_document(tantivy.Document(body=f"{r['speaker']}: {r['text']}", ref=r["id"]))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    size = sum(p.stat().st_size for p in Path(folder).iterdir())

    def search(q: str) -> list[str]:
        words = re.findall(r"\w+", q)
        if not words:
            return []
        query = index.parse_query(" OR ".join(words), ["body"])
        hits = searcher.search(query, 10).hits
        return [searcher.doc(addr)["ref"][0] for _, addr in hits]

    return search, size


def _fts5(imp: Imported, corpus: Corpus) -> tuple[Callable[[str], list[str]], int]:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, ref UNINDEXED, tokenize='porter')")
    db.executemany(
        "INSERT INTO t(body, ref) VALUES (?, ?)",
        [(f"{r['speaker']}: {r['text']}", r["id"]) for r in imp.conv.records],
    )
    pages = (
        db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    )

    def search(q: str) -> list[str]:
        words = [w for w in re.findall(r"\w+", q.lower()) if len(w) > 1]
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute(
            "SELECT ref FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (match,)
        ).fetchall()
        return [r[0] for r in rows]

    return search, int(pages)


# --- trees ------------------------------------------------------------------------------


def bake_trees(imported: dict[str, Imported], corpora: dict[str, Corpus], have: set[str]) -> None:
    """Our NumPy walk of the trees against LightGBM, treelite and onnxruntime."""
    table = Table(
        "Tree evaluation (trees trained here as the trainer does; one question = 50 candidates)",
        ["evaluator", "largest difference vs LightGBM", "p50 per question", "load", "install"],
    )
    try:
        import lightgbm as lgb  # noqa: PLC0415 (optional)
    except ImportError:
        print("\nTree evaluation: skipped, LightGBM is not installed (pip install -e '.[train]')")
        return
    from bench._train_ranker import build, export, train  # noqa: PLC0415
    from bench._tune_recall import ask  # noqa: PLC0415

    asked = [a for n, i in imported.items() for a in ask(corpora[n], i.user_id, n, i.conv, i.qvecs)]
    rows = build(corpora, {n: i.refs for n, i in imported.items()}, asked)
    booster = train(rows, np.ones(len(asked), dtype=np.bool_))
    forest = load_forest(export(booster))
    starts = np.cumsum([0, *rows.group])
    groups = [rows.x[starts[i] : starts[i + 1]] for i in range(len(rows.group))]
    truth = booster.predict(rows.x)

    def timed(fn: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
        gap = float(np.abs(np.asarray(fn(rows.x), dtype=np.float64).ravel() - truth).max())
        times = []
        for g in groups[:300]:
            t0 = time.perf_counter()
            fn(g)
            times.append((time.perf_counter() - t0) * 1000)
        return gap, statistics.median(times)

    text = json.dumps(export(booster))
    model_str = booster.model_to_string()
    load_ms = _ms(lambda: load_forest(json.loads(text)), 5)
    gap, p50 = timed(forest.predict)
    table.add(
        ["lifebot (NumPy, ranker.json)", f"{gap:.1e}", f"{p50:.2f} ms", f"{load_ms:.1f} ms",
         "none (NumPy)"]
    )  # fmt: skip
    load_ms = _ms(lambda: lgb.Booster(model_str=model_str), 5)
    gap, p50 = timed(lambda x: booster.predict(x, num_threads=1))
    table.add(
        ["LightGBM Booster.predict", "0", f"{p50:.2f} ms", f"{load_ms:.1f} ms",
         install_mb("lightgbm", have)]
    )  # fmt: skip
    try:
        import treelite  # noqa: PLC0415 (optional)

        load_ms = _ms(lambda: treelite.frontend.from_lightgbm(booster), 5)
        model = treelite.frontend.from_lightgbm(booster)
        gap, p50 = timed(lambda x: treelite.gtil.predict(model, x, nthread=1))
        table.add(
            ["treelite GTIL", f"{gap:.1e}", f"{p50:.2f} ms", f"{load_ms:.1f} ms (from a booster)",
             install_mb("treelite", have)]
        )  # fmt: skip
    except ImportError as exc:
        table.add(["treelite GTIL", f"not installed ({exc.name})", "", "", ""])
    try:
        load_ms = _ms(lambda: _onnx_session(forest, len(rows.x[0])), 3)
        session = _onnx_session(forest, len(rows.x[0]))
        name = session.get_inputs()[0].name
        gap, p50 = timed(lambda x: session.run(None, {name: x.astype(np.float32)})[0])
        table.add(
            ["onnxruntime (TreeEnsembleRegressor)", f"{gap:.1e}", f"{p50:.2f} ms",
             f"{load_ms:.1f} ms (model built and session made)", "none (already a dependency)"]
        )  # fmt: skip
    except ImportError as exc:
        table.add(["onnxruntime", f"not installed ({exc.name})", "", "", ""])
    table.print()
    print(
        f"(LightGBM {lgb.__version__}. onnxruntime's tree operator reads float32: features and "
        "thresholds are rounded, so a feature at a threshold can take the other branch; that, "
        "not a different walk, is its difference.)"
    )


def _onnx_session(forest: Any, n_features: int) -> Any:
    """Our trees as one ONNX TreeEnsembleRegressor node, in an onnxruntime session."""
    import onnx  # noqa: PLC0415 (optional, only to write the model)
    import onnxruntime as ort  # noqa: PLC0415
    from onnx import TensorProto, helper  # noqa: PLC0415

    attrs: dict[str, Any] = {k: [] for k in (
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
        "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
        "target_ids", "target_weights",
    )}  # fmt: skip
    for t in range(forest.feature.shape[0]):
        for node in range(forest.feature.shape[1]):
            left, right = int(forest.left[t, node]), int(forest.right[t, node])
            leaf = left == node and right == node
            if leaf and node and not _reachable(forest, t, node):
                continue
            attrs["nodes_treeids"].append(t)
            attrs["nodes_nodeids"].append(node)
            attrs["nodes_featureids"].append(int(forest.feature[t, node]))
            attrs["nodes_values"].append(float(forest.threshold[t, node]))
            attrs["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            attrs["nodes_truenodeids"].append(0 if leaf else left)
            attrs["nodes_falsenodeids"].append(0 if leaf else right)
            if leaf:
                attrs["target_treeids"].append(t)
                attrs["target_nodeids"].append(node)
                attrs["target_ids"].append(0)
                attrs["target_weights"].append(float(forest.value[t, node]))
    node = helper.make_node(
        "TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1, **attrs
    )
    graph = helper.make_graph(
        [node],
        "ranker",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    )
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(
        onnx._serialize(model) if hasattr(onnx, "_serialize") else model.SerializeToString(),
        sess_options=opts,
        providers=["CPUExecutionProvider"],
    )


def _reachable(forest: Any, t: int, target: int) -> bool:
    """Whether node ``target`` of tree ``t`` hangs under the root (padding does not)."""
    todo, seen = [0], set()
    while todo:
        n = todo.pop()
        if n == target:
            return True
        if n in seen:
            continue
        seen.add(n)
        left, right = int(forest.left[t, n]), int(forest.right[t, n])
        if not (left == n and right == n):
            todo += [left, right]
    return False


# --- vectors ----------------------------------------------------------------------------


def _corpus_of(vectors: np.ndarray) -> Corpus:
    """A corpus holding ``vectors`` (rows with no text), built through its real load path."""
    corpus = Corpus(model="bench")
    staged = _Staged(corpus, None)
    when = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [(i + 1, when, "message", False, None, "me", "") for i in range(len(vectors))]
    staged.add(rows)
    staged.add_vectors([(i + 1, v.astype("<f4").tobytes()) for i, v in enumerate(vectors)])
    corpus.commit(staged)
    return corpus


def bake_vectors(corpora: dict[str, Corpus], have: set[str], rows: int = 30_000) -> None:
    """Our int8 block scan against usearch and hnswlib, at dev size and at ``rows`` rows."""
    table = Table(
        "Vector scan (top 10 by cosine; recall against an exact float32 scan)",
        ["scanner", "rows", "recall@10", "query p50", "build", "memory", "install"],
    )
    dev = np.concatenate([c.matrix() for c in corpora.values() if c.matrix() is not None])
    rng = np.random.default_rng(7)
    # Queries: dev vectors with noise (near real items), normalised.
    queries = dev[rng.choice(len(dev), 100, replace=False)] + 0.05 * rng.standard_normal(
        (100, dev.shape[1])
    )
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    big = np.concatenate([dev, rng.standard_normal((rows - len(dev), dev.shape[1]))])
    big = (big / np.linalg.norm(big, axis=1, keepdims=True)).astype(np.float32)
    for matrix in (dev, big):
        n = len(matrix)
        truth = [set(np.argsort(-(matrix @ q))[:10].tolist()) for q in queries]
        for label, make in (
            ("lifebot (int8 blocks, Corpus.cosine)", _ours_scan),
            ("usearch exact (f32 scan)", lambda m: _usearch(m, exact=True)),
            ("usearch HNSW (i8)", lambda m: _usearch(m, exact=False)),
            ("hnswlib HNSW (f32, ef 64)", _hnswlib),
        ):
            try:
                t0 = time.perf_counter()
                search, nbytes = make(matrix)
                build = time.perf_counter() - t0
            except ImportError as exc:
                table.add([label, str(n), f"not installed ({exc.name})", "", "", "", ""])
                continue
            got = []
            times = []
            for q in queries:
                t1 = time.perf_counter()
                got.append(set(search(q)))
                times.append((time.perf_counter() - t1) * 1000)
            rec = np.mean([len(g & t) / 10 for g, t in zip(got, truth, strict=True)])
            dist = label.split()[0]
            table.add([
                label, f"{n:,}", f"{rec:.3f}", f"{statistics.median(times):.2f} ms",
                f"{build * 1000:.0f} ms", f"{nbytes / 1e6:.1f} MB",
                install_mb(dist, have) if dist in ("usearch", "hnswlib") else "none (NumPy)",
            ])  # fmt: skip
    table.print()
    print(
        "Ours gives the cosine of every item, which the blend, the floors and the learned "
        "stage read; an HNSW index gives a top k only (and approximately)."
    )


def _ours_scan(matrix: np.ndarray) -> tuple[Callable[[np.ndarray], list[int]], int]:
    corpus = _corpus_of(matrix)

    def search(q: np.ndarray) -> list[int]:
        cos = corpus.cosine(q)
        assert cos is not None
        top = np.argpartition(-cos, 10)[:10]
        return [int(i) for i in top]

    return search, len(matrix) * (matrix.shape[1] + 4)


def _usearch(matrix: np.ndarray, exact: bool) -> tuple[Callable[[np.ndarray], list[int]], int]:
    from usearch.index import Index, search  # noqa: PLC0415 (optional)

    if exact:
        # usearch's brute-force scan over the float32 rows: no index to build.
        def scan(q: np.ndarray) -> list[int]:
            return [int(k) for k in search(matrix, q, 10, exact=True, threads=1).keys]

        return scan, int(matrix.nbytes)
    index = Index(ndim=matrix.shape[1], metric="cos", dtype="i8")
    index.add(np.arange(len(matrix)), matrix, threads=1)

    def find(q: np.ndarray) -> list[int]:
        return [int(k) for k in index.search(q, 10, threads=1).keys]

    return find, int(index.memory_usage)


def _hnswlib(matrix: np.ndarray) -> tuple[Callable[[np.ndarray], list[int]], int]:
    import hnswlib  # noqa: PLC0415 (optional)

    index = hnswlib.Index(space="cosine", dim=matrix.shape[1])
    index.init_index(max_elements=len(matrix), ef_construction=100, M=16)
    index.set_num_threads(1)
    index.add_items(matrix, np.arange(len(matrix)))
    index.set_ef(64)

    def search(q: np.ndarray) -> list[int]:
        labels, _ = index.knn_query(q, k=10)
        return [int(i) for i in labels[0]]

    # Vectors plus about 2*M links of 4 bytes per row at level 0.
    return search, len(matrix) * (matrix.shape[1] * 4 + 2 * 16 * 4)


# --- run --------------------------------------------------------------------------------


async def run(data: Path, names: list[str], rows: int) -> None:
    embedder = MiniLMEmbedder()
    have = _runtime_closure()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'bake.db'}")
        await db.migrate()
        memory = MemoryService(db, None, embedder, SystemClock())
        imported = await import_all(db, memory, embedder, data, names, Path(tmp))
        corpora = {n: await memory.index.corpus(i.user_id) for n, i in imported.items()}
        bake_bm25(imported, corpora, have)
        bake_trees(imported, corpora, have)
        bake_vectors(corpora, have, rows)
        await db.dispose()


def main(argv: list[str] | None = None) -> None:
    """Entry point; from ``python -m bench`` (all benchmarks) it runs with the defaults."""
    if argv is None:
        argv = sys.argv[1:] if __name__ == "__main__" else []
    parser = locomo_parser(__doc__)
    parser.add_argument(
        "--rows", type=int, default=30_000, help="vectors in the larger scan (HNSW builds are slow)"
    )
    args = parser.parse_args(argv)
    missing = [c for c in args.conversations if not (args.data / f"{c}.json").exists()]
    if missing:
        print(f"skipped: no LoCoMo files {missing} in {args.data} (pass --data)")
        return
    asyncio.run(run(args.data, args.conversations, args.rows))


if __name__ == "__main__":
    main()
