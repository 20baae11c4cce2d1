"""The per-user search corpus in memory (#22): topped up a batch at a time it holds exactly
what a cold load of the same rows holds, its int8 vectors score like the float32 ones stored,
and it keeps far less than a kilobyte per item besides its vectors, on SQLite and PostgreSQL."""

from __future__ import annotations

import gc
import tracemalloc
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import sqlalchemy as sa

from bot.agent.memory.service import MemoryService
from bot.app.build import App
from storage.search.analysis import analyse
from tests.support.app import add_user

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
NOW = START + timedelta(days=30)
WORDS = (
    "pottery",
    "kiln",
    "glaze",
    "dentist",
    "appointment",
    "violin",
    "lesson",
    "harbour",
    "garden",
    "greyhound",
    "biscuit",
    "lisbon",
    "train",
    "ticket",
    "passport",
    "sister",
    "birthday",
    "cake",
    "marathon",
    "plumber",
    "apartment",
)
SPEAKERS = ("Ana", "Ben", "Me")


def _memory(app: App) -> MemoryService:
    """A memory service as a new process builds it (nothing in memory, no term cache)."""
    return MemoryService(app.db, None, app.memory.index.embedder, app.clock)


async def _insert(app: App, user_id: int, first: int, count: int, rng: np.random.Generator) -> None:
    """``count`` messages in three conversations, a minute apart with a two-hour gap now and
    then (new sessions), each with a random unit vector of the app's embedding model."""
    model = app.memory.index.embedder.model_id
    vecs = rng.standard_normal((count, 384)).astype("<f4")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = []
    for n in range(count):
        k = first + n
        words = " ".join(str(w) for w in rng.choice(WORDS, size=int(rng.integers(2, 7))))
        rows.append(
            {
                "u": user_id,
                "sid": k,
                "ts": START + timedelta(minutes=k + 120 * (k // 40)),
                "conv": 1 + k % 3,
                "speaker": SPEAKERS[k % 3],
                "ref": str(k),
                "text": f"{words} {k}",
                # Every seventh message has no vector yet (found by its words only).
                "blob": None if k % 7 == 0 else vecs[n].tobytes(),
                "model": None if k % 7 == 0 else model,
            }
        )
    async with app.db.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO memoryitem (user_id, kind, source_id, ts, conversation_id,"
                " channel, speaker, ref, text, hidden, embedding, embed_model) VALUES"
                " (:u, 'message', :sid, :ts, :conv, 'fake', :speaker, :ref, :text, false,"
                " :blob, :model)"
            ),
            rows,
        )


async def _stored_vectors(app: App, user_id: int) -> dict[int, np.ndarray]:
    async with app.db.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT id, embedding FROM memoryitem WHERE user_id = :u AND embedding IS NOT NULL"
            ),
            {"u": user_id},
        )
        return {int(i): np.frombuffer(bytes(b), dtype="<f4") for i, b in rows}


async def _found(memory: MemoryService, user_id: int, query: str) -> list[tuple[str, str]]:
    out = await memory.retriever.search(
        user_id, query, now=NOW, tz=ZoneInfo("UTC"), kinds=("message",), limit=8
    )
    return [(ev.item.text, ev.matched) for ev in out.evidence]


async def test_a_corpus_topped_up_in_batches_holds_what_a_cold_load_holds(
    any_db_app: App,
) -> None:
    app = any_db_app
    user = await add_user(app, "u1")
    assert user.id is not None
    rng = np.random.default_rng(7)
    warm = _memory(app)
    await _insert(app, user.id, 0, 300, rng)
    await warm.index.corpus(user.id)
    # Five more batches after the first load: enough postings that the recent ones are
    # folded into the main block on the way (several thousand).
    first = 300
    for size in (1, 700, 900, 40, 1100):
        await _insert(app, user.id, first, size, rng)
        first += size
        corpus = await warm.index.corpus(user.id)
        assert warm.index.corpora.last_load[user.id].analysed == size  # a top-up, not a reload

    cold = await _memory(app).index.corpus(user.id)
    assert len(corpus) == len(cold) == first
    a, b = corpus.arrays(), cold.arrays()
    for name in (
        "ids", "ts", "kinds", "hidden", "speaker", "session", "lengths", "near", "asks",
        "self_words",
    ):  # fmt: skip
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.mentioned, b.mentioned, equal_nan=True)
    assert len(set(a.session.tolist())) > 10  # the two-hour gaps cut sessions
    for word in [*WORDS, "ana", "1234", "nothing"]:
        (stem,) = analyse(word) or ["nothing"]
        docs, counts = corpus.term(stem)
        assert np.array_equal(docs, cold.term(stem)[0]), word
        assert np.array_equal(counts, cold.term(stem)[1]), word
        assert np.all(np.diff(docs) > 0), word
    q = rng.standard_normal(384).astype(np.float32)
    q /= np.linalg.norm(q)
    warm_cos, cold_cos = corpus.cosine(q), cold.cosine(q)
    assert warm_cos is not None and cold_cos is not None
    assert np.array_equal(warm_cos, cold_cos)
    assert corpus.missing_vectors() == cold.missing_vectors()
    assert len(corpus.missing_vectors()) == len(range(0, first, 7))

    for query in ("pottery kiln", "dentist appointment with Ana", "passport 1234"):
        assert await _found(warm, user.id, query) == await _found(_memory(app), user.id, query)


async def test_int8_vectors_score_like_the_stored_float32_ones(any_db_app: App) -> None:
    app = any_db_app
    user = await add_user(app, "u1")
    assert user.id is not None
    rng = np.random.default_rng(3)
    await _insert(app, user.id, 0, 2000, rng)
    corpus = await _memory(app).index.corpus(user.id)
    stored = await _stored_vectors(app, user.id)
    ids = corpus.arrays().ids
    exact = np.zeros((len(ids), 384), dtype=np.float32)
    for pos, item_id in enumerate(ids.tolist()):
        if item_id in stored:
            exact[pos] = stored[item_id]
    for item_id in list(stored)[:20]:
        q = stored[item_id]
        got = corpus.cosine(q)
        assert got is not None
        assert float(np.abs(got - exact @ q).max()) < 3e-3
        assert int(np.argmax(got)) == corpus.position(item_id)
        vec = corpus.vector(item_id)
        assert vec is not None and float(vec @ q) > 0.999
    assert corpus.cosine(np.ones(5, dtype=np.float32)) is None  # another model's size


async def test_the_corpus_keeps_a_small_fraction_of_float32_per_item(app: App) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    items = 2000  # 750 bytes an item here (700 at 6,000): the fixed part is small
    await _insert(app, user.id, 0, items, np.random.default_rng(5))
    memory = _memory(app)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        corpus = await memory.index.corpus(user.id)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(corpus) == items
    # 384 int8 and a scale per vector, NumPy columns, postings and the vocabulary (every
    # item has a number of its own). Float32 vectors alone would be 1,536 bytes an item.
    assert held / items < 900, f"{held / items:.0f} bytes per item"
