"""The term cache: a cold process reuses the tokenised text a previous one saved, and the
cache never changes what a search finds (new, forgotten and rewritten items; two users),
on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import sqlalchemy as sa
from sqlmodel import select

from bot.agent.memory.service import MemoryService
from bot.app.build import App
from bot.app.importer import import_file
from storage.models import MemoryItem, Message
from tests.support.app import add_user

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
START = NOW - timedelta(days=3)


async def _import(app: App, user_id: int, tmp: Path, name: str, texts: list[str]) -> None:
    """Import ``texts`` as one conversation a minute apart, then index them by words."""
    path = tmp / f"{name}.jsonl"
    rows = [
        {
            "id": f"{name}-{n}",
            "ts": (START + timedelta(minutes=n)).isoformat(),
            "speaker": "Me",
            "conversation": name,
            "text": text,
        }
        for n, text in enumerate(texts)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    report = await import_file(app.db, user_id, path, timezone="UTC")
    assert report.added == len(texts) and not report.bad
    await app.memory.index.index_pending(user_id=user_id, embed=False)


def _cold(app: App) -> MemoryService:
    """A memory service as a new process builds it: nothing in memory, the same data dir."""
    return MemoryService(
        app.db,
        None,
        app.memory.index.embedder,
        app.clock,
        cache_dir=app.settings.data_dir / "search-cache",
    )


async def _found(memory: MemoryService, user_id: int, query: str) -> list[str]:
    out = await memory.retriever.search(
        user_id, query, now=NOW, tz=ZoneInfo("UTC"), kinds=("message",), limit=5
    )
    return [ev.item.text for ev in out.evidence if ev.matched != "context"]


async def test_a_cold_search_reuses_saved_terms_and_finds_the_same(
    any_db_app: App, tmp_path: Path
) -> None:
    app = any_db_app
    alice = await add_user(app, "a1", name="alice")
    bob = await add_user(app, "b1", name="bob")
    assert alice.id is not None and bob.id is not None
    await _import(
        app,
        alice.id,
        tmp_path,
        "alice",
        [
            "I signed up for a pottery class on Saturdays",
            "The dentist moved my appointment to Thursday",
            "My sister adopted a greyhound called Biscuit",
        ],
    )
    await _import(app, bob.id, tmp_path, "bob", ["The submarine blueprints are in the safe"])

    # The first process tokenises everything and saves it.
    first = _cold(app)
    assert await _found(first, alice.id, "pottery class") == [
        "I signed up for a pottery class on Saturdays"
    ]
    assert first.index.corpora.last_load[alice.id].analysed == 3

    # A new process reuses every analysis and answers the same.
    second = _cold(app)
    assert await _found(second, alice.id, "pottery class") == [
        "I signed up for a pottery class on Saturdays"
    ]
    stats = second.index.corpora.last_load[alice.id]
    assert (stats.reused, stats.analysed) == (3, 0)

    # A new message: only it is tokenised, and it is found.
    await _import(app, alice.id, tmp_path, "alice2", ["Violin lessons start next month"])
    third = _cold(app)
    assert await _found(third, alice.id, "violin lessons") == ["Violin lessons start next month"]
    stats = third.index.corpora.last_load[alice.id]
    assert (stats.reused, stats.analysed) == (3, 1)

    # A forgotten message stays forgotten although its terms are still in the file.
    async with app.db.session() as s:
        msg = (await s.exec(select(Message).where(Message.text.startswith("I signed up")))).one()
    assert msg.id is not None
    await app.memory.index.hide_messages(alice.id, [msg.id])
    assert await _found(_cold(app), alice.id, "pottery class") == []

    # A text rewritten in place (same id) is tokenised again: the old words stop matching.
    async with app.db.session() as s:
        await s.exec(
            sa.update(MemoryItem)
            .where(sa.column("text") == "The dentist moved my appointment to Thursday")
            .values(text="The orthodontist moved my appointment to Friday")
        )
        await s.commit()
    fourth = _cold(app)
    assert await _found(fourth, alice.id, "orthodontist appointment") == [
        "The orthodontist moved my appointment to Friday"
    ]
    assert await _found(fourth, alice.id, "dentist") == []
    assert fourth.index.corpora.last_load[alice.id].analysed == 1


async def test_whether_a_turn_asks_or_tells_comes_back_from_the_cache(
    any_db_app: App, tmp_path: Path
) -> None:
    # The learned ranking reads, per turn, whether it asks something and how much it speaks
    # in the first person: a cold process reusing the cache must see what tokenising saw.
    app = any_db_app
    user = await add_user(app, "u1")
    assert user.id is not None
    texts = [
        "Do you still have the greyhound?",
        "Yes! I adopted him in March and my kids walk him every morning",
        "That sounds lovely",
    ]
    await _import(app, user.id, tmp_path, "pets", texts)
    first = await _cold(app).index.corpus(user.id)
    second_memory = _cold(app)
    second = await second_memory.index.corpus(user.id)
    assert second_memory.index.corpora.last_load[user.id].analysed == 0  # all from the file
    for corpus in (first, second):
        arr = corpus.arrays()
        assert arr.asks.tolist() == [True, False, False]
        assert arr.self_words.tolist() == [0, 2, 0]  # "I", "my"


async def test_another_users_cache_file_is_never_used(any_db_app: App, tmp_path: Path) -> None:
    app = any_db_app
    alice = await add_user(app, "a1", name="alice")
    bob = await add_user(app, "b1", name="bob")
    assert alice.id is not None and bob.id is not None
    await _import(app, alice.id, tmp_path, "alice", ["Our pottery kiln reached 1200 degrees"])
    await _import(app, bob.id, tmp_path, "bob", ["The submarine blueprints are in the safe"])
    first = _cold(app)
    await _found(first, alice.id, "pottery")
    store = first.index.corpora.store
    assert store is not None and store.path(alice.id).exists()

    # Alice's file put where Bob's belongs (a bug, a restore gone wrong): it is ignored.
    store.path(bob.id).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(store.path(alice.id), store.path(bob.id))
    cold = _cold(app)
    assert await _found(cold, bob.id, "pottery kiln") == []
    assert await _found(cold, bob.id, "submarine blueprints") == [
        "The submarine blueprints are in the safe"
    ]
    stats = cold.index.corpora.last_load[bob.id]
    assert (stats.reused, stats.analysed) == (0, 1)

    # A damaged file costs a re-tokenise, never an error.
    store.path(alice.id).write_bytes(b"not a cache")
    assert await _found(_cold(app), alice.id, "pottery kiln") == [
        "Our pottery kiln reached 1200 degrees"
    ]


async def test_a_hit_comes_with_the_turns_around_it(any_db_app: App, tmp_path: Path) -> None:
    app = any_db_app
    alice = await add_user(app, "a1", name="alice")
    assert alice.id is not None
    await _import(
        app,
        alice.id,
        tmp_path,
        "alice",
        [
            "I signed up for a pottery class on Saturdays",
            "The dentist moved my appointment to Thursday",
            "My sister adopted a greyhound called Biscuit",
        ],
    )
    out = await _cold(app).retriever.search(
        alice.id, "dentist appointment", now=NOW, tz=ZoneInfo("UTC"), kinds=("message",)
    )
    hit = out.evidence[0]
    assert hit.item.text == "The dentist moved my appointment to Thursday"
    assert [c.text for c in hit.context] == [
        "I signed up for a pottery class on Saturdays",
        "My sister adopted a greyhound called Biscuit",
    ]


async def test_a_running_process_finds_new_words_for_a_term_it_already_looked_up(
    any_db_app: App, tmp_path: Path
) -> None:
    app = any_db_app
    alice = await add_user(app, "a1", name="alice")
    assert alice.id is not None
    filler = ["The dentist moved my appointment", "Rain all day in Lisbon", "Bought new shoes"]
    await _import(app, alice.id, tmp_path, "one", ["I signed up for a pottery class", *filler])
    memory = _cold(app)
    assert await _found(memory, alice.id, "pottery") == ["I signed up for a pottery class"]
    await _import(app, alice.id, tmp_path, "two", [*filler, "The pottery glazes arrived today"])
    assert sorted(await _found(_cold(app), alice.id, "pottery")) == [
        "I signed up for a pottery class",
        "The pottery glazes arrived today",
    ]
    assert sorted(await _found(memory, alice.id, "pottery")) == [
        "I signed up for a pottery class",
        "The pottery glazes arrived today",
    ]


async def test_a_cache_file_whose_arrays_do_not_fit_together_is_ignored(
    app: App, tmp_path: Path
) -> None:
    alice = await add_user(app, "a1", name="alice")
    assert alice.id is not None
    await _import(
        app,
        alice.id,
        tmp_path,
        "alice",
        ["Our pottery kiln reached 1200 degrees", "The harbour ferry leaves at nine"],
    )
    first = _cold(app)
    await _found(first, alice.id, "pottery")
    store = first.index.corpora.store
    assert store is not None
    path = store.path(alice.id)
    with np.load(path, allow_pickle=False) as f:
        arrays = {name: f[name] for name in f.files}
    # The right user, database and version, but term ids pointing past the vocabulary
    # (a bug, a half-written disk block): reading it must not fail or find wrong items.
    arrays["term_ids"] = arrays["term_ids"] + 1000
    with path.open("wb") as fh:
        np.savez(fh, **arrays)

    cold = _cold(app)
    assert await _found(cold, alice.id, "harbour ferry") == ["The harbour ferry leaves at nine"]
    stats = cold.index.corpora.last_load[alice.id]
    assert (stats.reused, stats.analysed) == (0, 2)
