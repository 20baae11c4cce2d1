"""Resident memory of a serving process: ``python -m bench rss``.

Each measurement runs in a fresh child process that builds the app (SQLite), loads the speech
model (faster-whisper ``tiny.en``) and the local embedder, indexes 100,000 items for one user
(random unit vectors; what matters is their size) and loads that user's search corpus, as the
first question would. The child prints its VmRSS. Run with glibc's default malloc arenas
(the baseline, in the same run) and with ``LIFEBOT_MALLOC_ARENAS`` (2 by default), as
``lifebot serve`` sets it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa

ITEMS = int(os.environ.get("BENCH_RSS_ITEMS", "100000"))


def rss_mb() -> float:
    """This process's resident set size in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def fill(tmp: Path) -> None:
    """Index ITEMS items for user u0 (in its own process: filling is not serving)."""
    from bot.app.build import build_app, start_app  # noqa: PLC0415
    from tests.support.app import add_user, make_settings  # noqa: PLC0415

    application = build_app(make_settings(tmp, jobs_enabled=False))
    await start_app(application)
    try:
        user = await add_user(application, "u0")
        index = application.memory.index
        model = index.embedder.model_id
        rng = np.random.default_rng(1)
        now = time.time()
        async with application.db.engine.begin() as conn:
            for start in range(0, ITEMS, 5000):
                vecs = rng.standard_normal((min(5000, ITEMS - start), 384)).astype("<f4")
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                await conn.execute(
                    sa.text(
                        "INSERT INTO memoryitem (user_id, kind, source_id, ts, channel,"
                        " speaker, ref, text, hidden, embedding, embed_model) VALUES"
                        " (:u, 'message', :sid, CURRENT_TIMESTAMP, 'fake', '', :ref, :text,"
                        " false, :blob, :model)"
                    ),
                    [
                        {
                            "u": user.id,
                            "sid": start + n,
                            "ref": str(start + n),
                            "text": f"note {start + n} about the garden and the harbour",
                            "blob": v.tobytes(),
                            "model": model,
                        }
                        for n, v in enumerate(vecs)
                    ],
                )
        print(f"filled {ITEMS:,} items in {time.time() - now:.0f} s")
    finally:
        await application.close()


async def child(tmp: Path) -> None:
    """Load everything a serving process holds, then print the resident memory."""
    from bot.app.build import build_app, start_app  # noqa: PLC0415  (after mallopt)
    from tests.support.app import make_settings  # noqa: PLC0415

    application = build_app(make_settings(tmp, jobs_enabled=False))
    await start_app(application)
    try:
        await application.transcriber.warm_up()
        index = application.memory.index
        await index.embedder.embed(["warm up the embedding model"])
        corpus = await index.corpus(1)
        assert corpus is not None
        print(f"RSS {rss_mb():.0f} MB (speech model, embedder, {ITEMS:,} items in the corpus)")
    finally:
        await application.close()


def measure(arenas: int, tmp: str) -> str:
    """Run one child with ``arenas`` malloc arenas (0: glibc's default); its report line."""
    env = {**os.environ, "BENCH_RSS_CHILD": str(arenas), "BENCH_RSS_DIR": tmp}
    out = subprocess.run(
        [sys.executable, "-m", "bench.rss"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return next((line for line in out.splitlines() if line.startswith("RSS")), out.strip())


def main() -> None:
    """Entry point for ``python -m bench rss``."""
    arenas = os.environ.get("BENCH_RSS_CHILD")
    where = Path(os.environ.get("BENCH_RSS_DIR", "."))
    if arenas == "fill":
        asyncio.run(fill(where))
        return
    if arenas is not None:
        from bot.app.cli.runtime import limit_malloc_arenas  # noqa: PLC0415

        limit_malloc_arenas(int(arenas))
        asyncio.run(child(where))
        return
    from bot.config import Settings  # noqa: PLC0415

    configured = Settings(_env_file=None).malloc_arenas
    with tempfile.TemporaryDirectory() as tmp:
        print(measure_fill(tmp), flush=True)
        print(f"glibc default arenas     : {measure(0, tmp)}", flush=True)
        print(f"{configured} arenas (serve default): {measure(configured, tmp)}", flush=True)


def measure_fill(tmp: str) -> str:
    """Fill the database in a child of its own."""
    env = {**os.environ, "BENCH_RSS_CHILD": "fill", "BENCH_RSS_DIR": tmp}
    return subprocess.run(
        [sys.executable, "-m", "bench.rss"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


if __name__ == "__main__":
    main()
