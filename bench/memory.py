"""Memory benchmarks: `.venv/bin/python -m bench.memory [--sizes 10000 100000]`.

- embedding throughput of the local model (texts/s);
- import throughput (JSON Lines → messages, msgs/s), until searchable by words (import and
  index, vectors still to come: msgs/s) and indexing throughput with vectors (items/s);
- search latency p50/p95 with N indexed messages for one user, as a ratio against a
  brute-force NumPy scan over the same vectors in the same run.

The corpus is the test corpus repeated back in time. Each distinct text is embedded once by
the real model and its vector reused for repeats (a caching Embedder), so 100k messages do
not take 12 minutes of embedding; search still runs over 100k real vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from bot.agent.memory.embeddings import MiniLMEmbedder, Vectors
from bot.agent.memory.service import MemoryService
from bot.app.importer import import_file
from bot.clock import SystemClock
from storage.db import Database
from storage.repos.users import UserRepo
from storage.search.base import SearchFilter
from storage.search.vectors import exact_top_k
from tests.support.memory_corpus import NOW, TZ, build_corpus


class CachingEmbedder:
    """The real model, asked once per distinct text."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.cache: dict[str, np.ndarray] = {}

    async def embed(self, texts: list[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for t, v in zip(missing, await self.inner.embed(missing), strict=True):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


def write_corpus(path: Path, size: int) -> int:
    base = build_corpus().records
    n = 0
    with path.open("w", encoding="utf-8") as f:
        k = 0
        while n < size:
            shift = timedelta(days=80 * k)
            for rec in base:
                if n >= size:
                    break
                ts = datetime.fromisoformat(rec["ts"]) - shift
                row = {**rec, "id": f"{rec['id']}-{k}", "ts": ts.isoformat()}
                f.write(json.dumps(row) + "\n")
                n += 1
            k += 1
    return n


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def bench_size(size: int, embedder: CachingEmbedder, workdir: Path) -> dict[str, float]:
    db = Database(f"sqlite+aiosqlite:///{workdir / f'bench-{size}.db'}")
    await db.migrate()
    async with db.session() as s:
        user = await UserRepo(s).create("bench", timezone="Europe/Lisbon")
    assert user.id is not None
    path = workdir / f"corpus-{size}.jsonl"
    write_corpus(path, size)

    t0 = time.perf_counter()
    report = await import_file(db, user.id, path, timezone="Europe/Lisbon", batch=1000)
    import_s = time.perf_counter() - t0
    memory = MemoryService(db, None, embedder, SystemClock())
    memory.index.batch_size = 2000
    t0 = time.perf_counter()
    await memory.index.index_pending(user_id=user.id, embed=False)
    words_s = time.perf_counter() - t0  # searchable by words from here on
    await memory.index.embed_missing(user.id)
    index_s = time.perf_counter() - t0

    questions = [q.text for q in build_corpus().questions]
    await embedder.embed(questions)  # warm the cache: timing below is search, not the model
    # Warm-up also loads the per-user vector cache, as a running server would have.
    await memory.retriever.search(user.id, questions[0], now=NOW, tz=TZ)
    ours: list[float] = []
    for _ in range(3):
        for q in questions:
            t0 = time.perf_counter()
            await memory.retriever.search(user.id, q, now=NOW, tz=TZ, limit=10)
            ours.append((time.perf_counter() - t0) * 1000)

    # The baseline: every vector in one matrix, one matmul and a top-k per query.
    vectors = await memory.index.vectors()
    corpus = await memory.index.corpus(user.id)
    matrix, ids = corpus.matrix(), corpus.arrays().ids
    assert matrix is not None
    brute: list[float] = []
    for _ in range(3):
        for q in questions:
            qv = (await embedder.embed([q]))[0]
            t0 = time.perf_counter()
            exact_top_k(matrix, ids, qv, 10)
            brute.append((time.perf_counter() - t0) * 1000)
    # The vector stage alone, as lifebot runs it (cache check in the database, filter, top-k).
    stage: list[float] = []
    flt = SearchFilter(user.id)
    for _ in range(3):
        for q in questions:
            qv = (await embedder.embed([q]))[0]
            async with db.session() as s:
                t0 = time.perf_counter()
                await vectors.search(s, qv, embedder.model_id, flt, 50)
                stage.append((time.perf_counter() - t0) * 1000)
    await db.dispose()
    return {
        "stage_p50_ms": statistics.median(stage),
        "stage_p95_ms": pct(stage, 95),
        "messages": report.added,
        "import_msgs_s": report.added / import_s,
        "searchable_msgs_s": report.added / (import_s + words_s),
        "index_items_s": report.added / index_s,
        "p50_ms": statistics.median(ours),
        "p95_ms": pct(ours, 95),
        "brute_p50_ms": statistics.median(brute),
        "brute_p95_ms": pct(brute, 95),
    }


async def run(sizes: list[int]) -> None:
    model = MiniLMEmbedder()
    texts = [r["text"] for r in build_corpus().records][:512]
    model.embed_sync(texts[:8])
    t0 = time.perf_counter()
    model.embed_sync(texts)
    rate = len(texts) / (time.perf_counter() - t0)
    print(f"embedding ({model.model_id}, 2-core CPU): {rate:.0f} texts/s")
    embedder = CachingEmbedder(model)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            r = await bench_size(size, embedder, Path(tmp))
            print(
                f"{int(r['messages']):>7} msgs: import {r['import_msgs_s']:.0f} msgs/s, "
                f"searchable by words {r['searchable_msgs_s']:.0f} msgs/s, "
                f"index {r['index_items_s']:.0f} items/s (cached vectors) | search "
                f"p50 {r['p50_ms']:.1f} ms p95 {r['p95_ms']:.1f} ms | NumPy scan p50 "
                f"{r['brute_p50_ms']:.2f} ms p95 {r['brute_p95_ms']:.2f} ms | ratio p50 "
                f"{r['p50_ms'] / r['brute_p50_ms']:.1f}x p95 {r['p95_ms'] / r['brute_p95_ms']:.1f}x"
            )
            print(
                f"         vector stage alone (filtered exact index): p50 "
                f"{r['stage_p50_ms']:.2f} ms p95 {r['stage_p95_ms']:.2f} ms | ratio p50 "
                f"{r['stage_p50_ms'] / r['brute_p50_ms']:.1f}x "
                f"p95 {r['stage_p95_ms'] / r['brute_p95_ms']:.1f}x"
            )


def cold_search(size: int, runs: int = 5) -> None:
    """Wall time of `lifebot memory search` from a cold shell, with and without the term cache.

    Each run is a new process. "Without" deletes the cache first (that run also writes it);
    "with" runs right after on the file the previous run wrote.
    """
    cli = [sys.executable, "-m", "bot"]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        env = {**os.environ, "LIFEBOT_DATA_DIR": str(data)}
        env.pop("LIFEBOT_DATABASE_URL", None)

        def run(*args: str) -> tuple[float, float]:
            """Wall time and CPU time (user + system) of one command in a new process."""
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([*cli, *args], env=env, check=True, capture_output=True)  # noqa: S603
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            return wall, cpu

        write_corpus(data / "corpus.jsonl", size)
        run("users", "add", "bench", "--timezone", "Europe/Lisbon")
        run("import", str(data / "corpus.jsonl"), "--user", "bench")
        query = ("memory", "search", "adoption agencies", "--user", "bench")
        run(*query)  # page cache warm for both
        without, with_cache = [], []
        for _ in range(runs):
            shutil.rmtree(data / "search-cache", ignore_errors=True)
            without.append(run(*query))
            with_cache.append(run(*query))
        for n, what in enumerate(("wall", "CPU")):
            a = statistics.median(r[n] for r in without)
            b = statistics.median(r[n] for r in with_cache)
            print(
                f"cold `memory search`, {size} msgs, {runs} runs each, median {what} time: "
                f"without term cache {a:.2f} s, with {b:.2f} s | ratio {b / a:.2f}"
            )


def main(argv: list[str] | None = None) -> None:
    """Entry point; from ``python -m bench`` (all benchmarks) with the default sizes."""
    if argv is None:
        argv = sys.argv[1:] if __name__ == "__main__" else []
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--cold", type=int, metavar="N", help="only time a cold CLI search over N messages"
    )
    args = parser.parse_args(argv)
    if args.cold:
        cold_search(args.cold)
        return
    asyncio.run(run(args.sizes))


if __name__ == "__main__":
    main()
