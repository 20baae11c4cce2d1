"""A user's data leaves and comes back whole: export, users delete, import, backup."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import zipfile
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from sqlmodel import func, select
from typer.testing import CliRunner

from bot.app.build import App, build_app, start_app
from bot.app.cli import app as cli
from bot.app.features import REGISTRY
from storage.backup import backup
from storage.models import DeviceSession, Fact, LocationPoint, Message, User
from storage.repos.devices import DeviceRepo
from storage.repos.userdata import UserDataRepo
from tests.fakes.llm import FakeLLM, say
from tests.support.app import make_settings
from tests.support.builders import make_inbound
from tests.support.jobs import make_user

T = TypeVar("T")
SESSION = "s-0123456789abcdef"


def _with_app(tmp_path: Path, fn: Callable[[App], Awaitable[T]], llm: FakeLLM | None = None) -> T:
    async def go() -> T:
        application = build_app(make_settings(tmp_path, llm))
        try:
            await start_app(application)
            return await fn(application)
        finally:
            await application.close()

    return asyncio.run(go())


async def _fill(application: App) -> None:
    """Ana: two turns, a fact, a pendant with one spooled session. Bob: one message."""
    from tests.fakes.channel import RecordingChannel

    application.dispatcher.register(RecordingChannel("fake"))
    ana = await make_user(application, "ana")
    await make_user(application, "bob")
    await application.dispatcher.handle(
        make_inbound("/remember my bike is a green Gazelle", sender="ana")
    )
    await application.dispatcher.handle(make_inbound("I parked at the red gate", sender="ana"))
    await application.dispatcher.handle(make_inbound("hello from bob", sender="bob"))
    now = datetime.now(UTC)
    async with application.db.session() as s:
        device, _ = await DeviceRepo(s).add(ana.id or 0, "kitchen")
        s.add(DeviceSession(id=SESSION, device_id=device.id or 0, user_id=ana.id or 0,
                            started_at=now, last_seen_at=now))  # fmt: skip
    spool = application.settings.data_dir / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    (spool / f"{SESSION}.pcm").write_bytes(b"\x01\x00" * 1600)


async def _counts(application: App) -> dict[str, int]:
    async with application.db.session() as s:
        out = {}
        for name, model in (("user", User), ("message", Message), ("fact", Fact)):
            n = (await s.exec(select(func.count()).select_from(model))).one()
            out[name] = int(n)
        return out


def test_export_delete_import_brings_everything_back(
    tmp_path: Path, fake_llm_sync: FakeLLM
) -> None:
    fake_llm_sync.default = lambda _body: say("Noted.")
    _with_app(tmp_path, _fill, fake_llm_sync)
    before = _with_app(tmp_path, _counts)
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    zpath = tmp_path / "ana.zip"

    exported = runner.invoke(cli, ["export", "--user", "ana", "-o", str(zpath)], env=env)
    assert exported.exit_code == 0, exported.output
    assert " messages, " in exported.output and "1 audio file." in exported.output
    with zipfile.ZipFile(zpath) as zf:
        names = set(zf.namelist())
        facts = json.loads(zf.read("fact.json"))
        messages = json.loads(zf.read("message.json"))
    assert {"manifest.json", "user.json", "message.json", f"audio/{SESSION}.pcm"} <= names
    assert any("green Gazelle" in f["text"] for f in facts)
    assert any(m["text"] == "I parked at the red gate" for m in messages)
    assert not any("bob" in m["text"] for m in messages)  # only ana's data

    refused = runner.invoke(cli, ["users", "delete", "ana"], env=env, input="n\n")
    assert refused.exit_code == 1 and "Nothing deleted." in refused.output
    assert _with_app(tmp_path, _counts) == before

    cache = tmp_path / "data" / "files" / "search-cache"
    had = set(cache.rglob("*.npz"))
    searched = runner.invoke(cli, ["memory", "search", "red gate", "--user", "ana"], env=env)
    assert searched.exit_code == 0, searched.output
    anas = set(cache.rglob("*.npz")) - had  # her tokenised words, kept for the next search
    assert len(anas) == 1

    deleted = runner.invoke(cli, ["users", "delete", "ana", "--yes"], env=env)
    assert deleted.exit_code == 0, deleted.output
    assert not any(p.exists() for p in anas)
    # Said in people's words, not table names: "..., 1 device session and 7 other records".
    assert "1 audio file." in deleted.output and "1 device session" in deleted.output
    assert "devicesession" not in deleted.output and "other records" in deleted.output
    after_delete = _with_app(tmp_path, _counts)
    assert after_delete["user"] == before["user"] - 1
    assert after_delete["fact"] == 0
    assert not (tmp_path / "data" / "spool" / f"{SESSION}.pcm").exists()
    gone = runner.invoke(cli, ["memory", "search", "red gate", "--user", "ana"], env=env)
    assert gone.exit_code == 2  # no such user any more

    imported = runner.invoke(cli, ["import", str(zpath)], env=env)
    assert imported.exit_code == 0, imported.output
    assert imported.output.startswith("Imported ana as user 3 (was 1): 4 messages, 1 fact")
    assert _with_app(tmp_path, _counts) == before
    assert (tmp_path / "data" / "spool" / f"{SESSION}.pcm").read_bytes() == b"\x01\x00" * 1600
    found = runner.invoke(cli, ["memory", "search", "red gate", "--user", "ana", "--json"], env=env)
    assert found.exit_code == 0, found.output
    assert any("red gate" in hit["text"] for hit in json.loads(found.output))

    twice = runner.invoke(cli, ["import", str(zpath)], env=env)
    assert twice.exit_code == 1 and "already has a user named ana" in twice.output
    assert _with_app(tmp_path, _counts) == before  # nothing of the second try stayed


@pytest.fixture
def fake_llm_sync() -> Iterator[FakeLLM]:
    """A FakeLLM served from its own thread, for tests that drive the CLI synchronously."""
    import threading

    server = FakeLLM()
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    yield server
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


async def test_dump_load_delete_on_sqlite_and_postgres(any_db_app: App) -> None:
    ana = await make_user(any_db_app, "ana")
    await any_db_app.dispatcher.handle(make_inbound("/remember I like tea", sender="ana"))
    async with any_db_app.db.session() as s:
        data = await UserDataRepo(s, REGISTRY.user_tables()).dump(ana.id or 0)
    async with any_db_app.db.session() as s:
        counts = await UserDataRepo(s, REGISTRY.user_tables()).delete(ana.id or 0)
    assert counts["user"] == 1 and counts["fact"] == 1
    async with any_db_app.db.session() as s:
        back, ids = await UserDataRepo(s, REGISTRY.user_tables()).load_new(data)
    assert ids.get("user", ana.id or 0) == back  # a new id (SQLite may give a freed one)
    async with any_db_app.db.session() as s:
        facts = (await s.exec(select(Fact).where(Fact.user_id == back))).all()
        # New rows still get fresh ids after ids were inserted by hand (PostgreSQL sequences).
        newcomer = User(display_name="cleo")
        s.add(newcomer)
        await s.flush()
    assert [f.text for f in facts] == [f["text"] for f in data["fact"]]
    assert newcomer.id is not None and newcomer.id > back


async def test_backup_is_consistent_while_the_database_is_written(tmp_path: Path, app: App) -> None:
    ana = await make_user(app, "ana")
    stop = asyncio.Event()

    async def writer() -> int:
        n = 0
        while not stop.is_set():
            # A command writes the message and its reply without asking the model.
            await app.dispatcher.handle(make_inbound(f"/tasks {n}", sender="ana"))
            n += 1
        return n

    task = asyncio.create_task(writer())
    await asyncio.sleep(0.3)
    done = await backup(
        db=app.db,
        files=app.files,
        target_root=tmp_path / "bk",
        now=datetime.now(UTC),
        spool_dir=app.settings.data_dir / "spool",
    )
    stop.set()
    written = await task
    conn = sqlite3.connect(done.database)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        row = conn.execute("SELECT count(*) FROM message WHERE user_id = ?", (ana.id,)).fetchone()
        copied = row[0]
    finally:
        conn.close()
    assert 0 < copied <= 2 * written  # each command is stored, with its reply


def test_backup_cli_names_the_folder(tmp_path: Path) -> None:
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    assert runner.invoke(cli, ["users", "add", "ana"], env=env).exit_code == 0
    result = runner.invoke(cli, ["backup", "--to", str(tmp_path / "bk")], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Backed up to {tmp_path / 'bk'}/lifebot-backup-")
    (folder,) = (tmp_path / "bk").iterdir()
    conn = sqlite3.connect(folder / "lifebot.db")
    try:
        assert conn.execute("SELECT display_name FROM user").fetchall() == [("ana",)]
    finally:
        conn.close()


async def test_export_and_delete_cover_location_history(any_db_app: App) -> None:
    """Issue 24: "export and delete-my-data include it" — points, stays and places alike."""
    from bot.location.geo import Fix

    ana = await make_user(any_db_app, "ana")
    assert ana.id is not None
    await any_db_app.location.set_enabled(ana.id, True)
    start = datetime.now(UTC).replace(microsecond=0)  # points from before "on" are dropped
    fixes = [
        Fix(start + timedelta(minutes=2 * i), 38.7223 + 0.00001 * (i % 3), -9.1393, 10.0)
        for i in range(30)  # an hour at one spot: one stay
    ]
    assert await any_db_app.location.ingest(ana.id, fixes, "test") == 30
    async with any_db_app.db.session() as s:
        data = await UserDataRepo(s, REGISTRY.user_tables()).dump(ana.id)
    assert len(data["locationpoint"]) == 30
    assert len(data["stay"]) == 1
    async with any_db_app.db.session() as s:
        counts = await UserDataRepo(s, REGISTRY.user_tables()).delete(ana.id)
    assert counts["locationpoint"] == 30 and counts["stay"] == 1
    async with any_db_app.db.session() as s:
        left = (
            await s.exec(
                select(func.count())
                .select_from(LocationPoint)
                .where(LocationPoint.user_id == ana.id)
            )
        ).one()
    assert left == 0


def test_an_export_is_not_imported_into_another_user_by_a_user_option(tmp_path: Path) -> None:
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    for name in ("ana", "bob"):
        assert runner.invoke(cli, ["users", "add", name], env=env).exit_code == 0
    zpath = tmp_path / "ana.zip"
    assert runner.invoke(cli, ["export", "--user", "ana", "-o", str(zpath)], env=env).exit_code == 0
    assert runner.invoke(cli, ["users", "delete", "ana", "--yes"], env=env).exit_code == 0

    into_bob = runner.invoke(cli, ["import", str(zpath), "--user", "bob"], env=env)
    assert into_bob.exit_code == 2
    assert "brings back its own user" in into_bob.output and "--user" in into_bob.output
    listed = runner.invoke(cli, ["users"], env=env).output
    assert "ana" not in listed  # nothing was imported

    imported = runner.invoke(cli, ["import", str(zpath)], env=env)
    assert imported.exit_code == 0
    assert imported.output.startswith("Imported ana as user 3 (was 1): no messages.")


def test_importing_a_chat_file_again_adds_nothing_and_shows_no_empty_progress(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    assert runner.invoke(cli, ["users", "add", "ana"], env=env).exit_code == 0
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        json.dumps({"id": "m1", "ts": "2024-05-03T10:00:00Z", "text": "I adopted Biscuit"}) + "\n"
    )

    first = runner.invoke(cli, ["import", str(chat), "--user", "ana"], env=env)
    again = runner.invoke(cli, ["import", str(chat), "--user", "ana"], env=env)

    assert first.exit_code == 0, first.output
    assert "Imported 1 message (0 already there)" in first.output
    assert "indexing" in first.output
    assert again.exit_code == 0, again.output
    assert "Imported 0 messages (1 already there)" in again.output
    assert "indexing" not in again.output  # was an empty "indexing 0/?" bar


async def _others(application: App) -> None:
    """Cleo and Dan, each with turns of their own: their rows take the ids Ana had."""
    from tests.fakes.channel import RecordingChannel

    application.dispatcher.register(RecordingChannel("fake"))
    for name in ("cleo", "dan"):
        await make_user(application, name)
        for text in (f"{name} likes the blue door", f"/remember {name} plays the cello"):
            await application.dispatcher.handle(make_inbound(text, sender=name))


async def _cite_first_message(application: App) -> None:
    """Ana's last answer cites her first message (as a memory search would have it)."""
    async with application.db.session() as s:
        mine = sorted((await s.exec(select(Message))).all(), key=lambda m: m.id or 0)
        ana = [m for m in mine if m.user_id == mine[0].user_id]
        first, answer = ana[0], [m for m in ana if m.direction == "out"][-1]
        answer.citations = [{"index": 1, "kind": "message", "source_id": str(first.id)}]
        s.add(answer)


async def _anas_links(application: App) -> dict[str, object]:
    """Where Ana's references point, read back from the database the import went into."""
    from storage.models import MemoryItem

    async with application.db.session() as s:
        ana = (await s.exec(select(User).where(User.display_name == "ana"))).one()
        msgs = {m.id: m for m in (await s.exec(select(Message))).all()}
        items = (await s.exec(select(MemoryItem).where(MemoryItem.user_id == ana.id))).all()
        facts = (await s.exec(select(Fact).where(Fact.user_id == ana.id))).all()
    cited = [
        msgs[int(c["source_id"])]
        for m in msgs.values()
        if m.user_id == ana.id
        for c in m.citations or []
    ]
    sources = [msgs[i] for f in facts for i in f.source_message_ids or []]
    return {
        "id": ana.id,
        "items point at hers": all(
            msgs[i.source_id].user_id == ana.id for i in items if i.kind == "message"
        ),
        "cited": [(m.user_id, m.text) for m in cited],
        "fact sources": [(m.user_id, m.text) for m in sources],
        "conversations": {m.conversation_id for m in msgs.values() if m.user_id == ana.id},
        "others' conversations": {m.conversation_id for m in msgs.values() if m.user_id != ana.id},
    }


def test_import_into_a_lifebot_that_already_has_people(
    tmp_path: Path, fake_llm_sync: FakeLLM
) -> None:
    fake_llm_sync.default = lambda _body: say("Noted.")
    home, family = tmp_path / "home", tmp_path / "family"
    _with_app(home, _fill, fake_llm_sync)
    _with_app(home, _cite_first_message)
    _with_app(family, _others, fake_llm_sync)
    before = _with_app(family, _counts)
    runner = CliRunner()
    zpath = tmp_path / "ana.zip"
    out = runner.invoke(
        cli,
        ["export", "--user", "ana", "-o", str(zpath)],
        env={"LIFEBOT_DATA_DIR": str(home / "data")},
    )
    assert out.exit_code == 0, out.output

    env = {"LIFEBOT_DATA_DIR": str(family / "data")}
    imported = runner.invoke(cli, ["import", str(zpath)], env=env)
    assert imported.exit_code == 0, imported.output
    assert imported.output.startswith("Imported ana as user 3 (was 1): 4 messages, 1 fact")
    assert "every id is new" in imported.output
    after = _with_app(family, _counts)
    assert after == {"user": 3, "message": before["message"] + 4, "fact": before["fact"] + 1}

    links = _with_app(family, _anas_links)
    assert links["id"] == 3 and links["items point at hers"]
    assert links["cited"] == [(3, "/remember my bike is a green Gazelle")]
    assert links["fact sources"] == [(3, "/remember my bike is a green Gazelle")]
    assert not set(links["conversations"]) & set(links["others' conversations"])  # type: ignore[call-overload]
    found = runner.invoke(cli, ["memory", "search", "red gate", "--user", "ana", "--json"], env=env)
    assert found.exit_code == 0, found.output
    assert [h["text"] for h in json.loads(found.output)][:1] == ["I parked at the red gate"]
    cleo = runner.invoke(cli, ["memory", "search", "red gate", "--user", "cleo", "--json"], env=env)
    assert "red gate" not in cleo.output
    assert (family / "data" / "spool" / f"{SESSION}.pcm").read_bytes() == b"\x01\x00" * 1600

    # The same person again: refused by name, and under another name by her identity.
    again = runner.invoke(cli, ["import", str(zpath)], env=env)
    assert again.exit_code == 1 and "already has a user named ana (user 3)" in again.output
    renamed = runner.invoke(cli, ["import", str(zpath), "--as", "ana b"], env=env)
    assert renamed.exit_code == 1
    assert (
        "channelidentity" in renamed.output and "already belongs to ana (user 3)" in renamed.output
    )
    assert _with_app(family, _counts) == after
