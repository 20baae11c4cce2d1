"""Moving a person from one lifebot to another, as a person and an attacker would (outside QA).

Attacks: one real export (every declared table filled, a photo) is edited the way a hostile
or damaged file could be, then brought with `lifebot import` into a lifebot where Bob and
Cleo already live. Each is refused in plain words (exit 1, no traceback), nothing of it is
kept, and nothing of theirs changes; on SQLite and on PostgreSQL.

Moves: SQLite -> PostgreSQL -> SQLite value for value; a weekly reminder fires once a week
after the move; her API token finds her history there and Bob's does not; her PDF and photo
move and go with her; she owns only an empty lifebot; a calendar file two people imported
does not stop her; a running lifebot never searches a deleted person's words for whoever
gets her freed id.
"""

from __future__ import annotations

import asyncio
import json
import zipfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlmodel import SQLModel, col
from sqlmodel import select as select_rows

from bot.app.build import App, build_app, start_app
from bot.app.features import REGISTRY
from storage.models import CalendarEvent, CalendarSource, Contact, Fact
from tests.support.app import make_settings
from tests.support.cli import run_cli
from tests.support.rows import expected_rows, fill, ids_of, rows_of

TABLES = set(REGISTRY.user_tables())
REFS = REGISTRY.references()
Rows = dict[str, list[dict[str, Any]]]
Edit = Callable[[Rows, dict[str, Any]], None]
"""Changes an export's tables (and manifest, under ``manifest``) in place; gets Bob's ids."""


async def _started(data_dir: Path, url: str | None = None) -> App:
    app = build_app(make_settings(data_dir.parent, data_dir=data_dir, database_url_setting=url))
    await start_app(app)
    return app


async def _person(app: App, name: str, salt: int) -> dict[str, Any]:
    """A user with one generated row in every declared table, and a photo; their ids."""
    from storage.models import User, utcnow

    users = User.__table__  # type: ignore[attr-defined]
    async with app.db.engine.begin() as conn:
        q = users.insert().values(display_name=name, created_at=utcnow()).returning(users.c.id)
        user_id = int((await conn.execute(q)).scalar_one())
        ids = await fill(conn, TABLES, user_id, salt=salt, references=REFS)
    await app.files.put("photos", f"{user_id}/{ids['message']}-0.jpg", f"{name}'s".encode())
    return ids


@pytest.fixture(scope="module")
def export_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ana's export: a row in every table and a photo, written by `lifebot export`."""
    home = tmp_path_factory.mktemp("home")

    async def make() -> Path:
        app = await _started(home / "data")
        try:
            await _person(app, "ana", salt=1)
        finally:
            await app.close()
        target = home / "ana.zip"
        env = {"LIFEBOT_DATA_DIR": str(home / "data")}
        code, out, err = await run_cli(
            "export", "--user", "ana", "-o", str(target), cwd=home, env=env
        )
        assert code == 0, out + err
        return target

    return asyncio.run(make())


def _edited(source: Path, target: Path, edit: Edit, bobs: dict[str, Any]) -> Path:
    """``source`` with its JSON members changed by ``edit`` (files copied as they are)."""
    with zipfile.ZipFile(source) as zin:
        tables = {
            n.removesuffix(".json"): json.loads(zin.read(n))
            for n in zin.namelist()
            if n.endswith(".json") and "/" not in n
        }
        edit(tables, bobs)
        with zipfile.ZipFile(target, "w") as zout:
            for info in zin.infolist():
                name = info.filename
                if name.endswith(".json") and "/" not in name:
                    zout.writestr(name, json.dumps(tables[name.removesuffix(".json")]))
                else:
                    zout.writestr(info, zin.read(name))
    return target


def _set(table: str, **values: Any) -> Edit:
    def edit(tables: Rows, _bobs: dict[str, Any]) -> None:
        tables[table][0].update(values)

    return edit


def _version(value: Any) -> Edit:
    def edit(tables: Rows, _bobs: dict[str, Any]) -> None:
        tables["manifest"]["version"] = value  # type: ignore[call-overload]

    return edit


def _bobs_session(tables: Rows, bobs: dict[str, Any]) -> None:
    """Her audio segment claims Bob's pendant session (a text id, no new id to hide behind)."""
    tables["audiosegment"][0].update(session_id=bobs["devicesession"], seq=999)


ATTACKS: dict[str, Edit] = {
    "a version that is not a number": _version([2]),
    "no version": _version(None),
    "a user id that is not a number": _set("user", id="ana"),
    "a user id that is a list": _set("user", id=[1]),
    "a row's owner that is a list": _set("message", user_id=[1]),
    "a row of nobody (owner 0)": _set("message", user_id=0),
    "a row of nobody (no owner)": _set("message", user_id=None),
    "a text that is an object": _set("fact", text={"a": 1}),
    "a time that is a number": _set("message", created_at=5),
    "an integer too big for any database": _set("audiosegment", attempts=10**30),
    "a row pointing at another person's pendant session": _bobs_session,
}
EACH_DATABASE = {
    "a text that is an object",
    "an integer too big for any database",
    "a row pointing at another person's pendant session",
}
"""What each database takes or refuses in its own way (the rest is read before any of it)."""


async def _state(app: App) -> dict[str, int]:
    """Rows in every table (stored files' too)."""
    async with app.db.engine.connect() as conn:
        return {
            t.name: int((await conn.execute(select(func.count()).select_from(t))).scalar() or 0)
            for t in SQLModel.metadata.sorted_tables
        }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_hostile_or_damaged_export_is_refused_in_plain_words_and_leaves_nothing(
    backend: str, export_zip: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    family = tmp_path / "family" / "data"
    app = await _started(family, url)
    try:
        bobs = await _person(app, "bob", salt=2)
        await _person(app, "cleo", salt=3)
        before = await _state(app)
        env = {"LIFEBOT_DATA_DIR": str(family), **({"LIFEBOT_DATABASE_URL": url} if url else {})}
        wrong = []
        for n, (what, edit) in enumerate(ATTACKS.items()):
            if url and what not in EACH_DATABASE:
                continue
            crafted = _edited(export_zip, tmp_path / f"crafted-{n}.zip", edit, bobs)
            code, out, err = await run_cli("import", str(crafted), cwd=tmp_path, env=env)
            if code != 1 or "Traceback" in err or not err.startswith("error: "):
                wrong.append(f"{what}: exit {code}, {(out + err).strip()[-300:]}")
            if await _state(app) != before:
                wrong.append(f"{what}: the database changed")
                break
        assert not wrong, "\n".join(wrong)
    finally:
        await app.close()


async def _ids_of(app: App, user_id: int) -> dict[str, Any]:
    """The key of the one row of ``user_id`` in each table (as ``tests.support.rows`` made)."""
    async with app.db.engine.connect() as conn:
        return await ids_of(conn, TABLES, user_id)


def _unembedded(rows: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``rows`` without memory's vectors: each import embeds them again with its own model."""
    columns = [c.name for c in SQLModel.metadata.tables["memoryitem"].columns]
    kept = [i for i, c in enumerate(columns) if c not in ("embedding", "embed_model")]
    items = [tuple(r[i] for i in kept) for r in rows["memoryitem"]]
    return {**rows, "memoryitem": items}


async def test_a_person_moves_sqlite_to_postgresql_to_sqlite_and_arrives_whole(
    export_zip: Path, tmp_path: Path, postgres_url: str
) -> None:
    """A chain of moves across both databases, each into a lifebot with people of its own:
    every row of hers, value for value, every reference hers, her photo, and a delete that
    takes all of her and nothing of theirs."""
    from storage.models import User

    pg, last = tmp_path / "pg" / "data", tmp_path / "last" / "data"
    first_hop = tmp_path / "via-postgres.zip"
    for data_dir, url, source, target in (
        (pg, postgres_url, export_zip, first_hop),
        (last, None, first_hop, None),
    ):
        app = await _started(data_dir, url)
        try:
            others = [await _person(app, n, salt=s) for n, s in (("bob", 2), ("cleo", 3))]
            env = {
                "LIFEBOT_DATA_DIR": str(data_dir),
                **({"LIFEBOT_DATABASE_URL": url} if url else {}),
            }
            code, out, err = await run_cli("import", str(source), cwd=tmp_path, env=env)
            assert code == 0, out + err
            assert out.startswith("Imported ana as user 3 (was ")
            if target is not None:
                args = ("export", "--user", "ana", "-o", str(target))
                code, out, err = await run_cli(*args, cwd=tmp_path, env=env)
                assert code == 0, out + err
        finally:
            await app.close()

    app = await _started(last)
    try:
        ids = await _ids_of(app, 3)
        async with app.db.engine.connect() as conn:
            got = _unembedded(await rows_of(conn, TABLES, 3))
            assert got == _unembedded(expected_rows(TABLES, 3, 1, ids, REFS))
            theirs = {u: await rows_of(conn, TABLES, u) for u in (1, 2)}
        assert await app.files.get("photos", f"3/{ids['message']}-0.jpg") == b"ana's"
        gone = await app.userdata.delete(3)
        assert gone.files == {"photos": 1}
        async with app.db.engine.connect() as conn:
            assert not any((await rows_of(conn, TABLES, 3)).values())
            assert {u: await rows_of(conn, TABLES, u) for u in (1, 2)} == theirs
            users = User.__table__  # type: ignore[attr-defined]
            names = (await conn.execute(select(users.c.display_name))).scalars().all()
        assert sorted(names) == ["bob", "cleo"]
        assert [i.key for i in await app.files.listing("photos")] == [
            f"{u}/{others[u - 1]['message']}-0.jpg" for u in (1, 2)
        ]
    finally:
        await app.close()


BOMB = 64 * 1024 * 1024
"""Bytes a crafted member unpacks to (from about 64 kB in the zip)."""

MEMBERS: dict[str, tuple[str, bytes]] = {
    "a file climbing out of the store": ("files/photos/1/../../../../escaped.jpg", b"x"),
    "a file from the root": ("/files/photos/1/9-0.jpg", b"x"),
    "another person's file": ("files/photos/2/9-0.jpg", b"x"),
    "a photo that unpacks to 64 MB": ("files/photos/1/9-0.jpg", bytes(BOMB)),
    "a table that unpacks to 64 MB": ("contact.json", b"[" + b" " * BOMB + b"]"),
}


@pytest.mark.parametrize("what", list(MEMBERS))
async def test_a_zip_member_that_is_not_hers_or_blows_up_is_refused_and_leaves_nothing(
    what: str, export_zip: Path, tmp_path: Path
) -> None:
    name, data = MEMBERS[what]
    crafted = tmp_path / "crafted.zip"
    with zipfile.ZipFile(export_zip) as zin, zipfile.ZipFile(crafted, "w") as zout:
        for info in zin.infolist():
            if info.filename != name:
                zout.writestr(info, zin.read(info.filename))
        zout.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    family = tmp_path / "family" / "data"
    app = await _started(family)
    try:
        await _person(app, "bob", salt=2)
        before = await _state(app)
        env = {"LIFEBOT_DATA_DIR": str(family)}
        code, out, err = await run_cli("import", str(crafted), cwd=tmp_path, env=env)
        assert code == 1 and err.startswith("error: ") and "Traceback" not in err, out + err
        assert "nothing was imported" in err.lower()
        assert await _state(app) == before
        assert [i.key.split("/")[0] for i in await app.files.listing("photos")] == ["1"]
    finally:
        await app.close()
    assert not await asyncio.to_thread(lambda: list(tmp_path.rglob("escaped.jpg")))


async def test_a_repeating_reminder_fires_once_after_the_move_and_keeps_repeating(
    tmp_path: Path,
) -> None:
    """Ana's weekly reminder, fired once at home, moves to a lifebot where Bob's and Cleo's
    weekly reminders have the same ids: each fires once on Monday, hers to her chat only."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from tests.fakes.channel import RecordingChannel
    from tests.fakes.clock import ManualClock
    from tests.support.builders import make_inbound
    from tests.support.jobs import deliveries, jobs_app, jobs_of, make_user

    ny = ZoneInfo("America/New_York")
    clock = ManualClock(datetime(2025, 6, 3, 10, 0, tzinfo=ny).astimezone(UTC))
    target = tmp_path / "ana.zip"
    async with jobs_app(tmp_path / "home", clock) as home:
        home.dispatcher.register(RecordingChannel("fake"))
        await make_user(home, "ana", timezone="America/New_York")
        said = make_inbound("/remind every Monday at 9 to water the fern", sender="ana")
        await home.dispatcher.handle(said)
        await jobs_of(home).plan_and_send(clock.set(datetime(2025, 6, 9, 9, 0, tzinfo=ny)))
        assert [r.key for r in await deliveries(home, "reminder")] == ["reminder:1:1:0"]
        await home.userdata.export(1, target)

    async with jobs_app(tmp_path / "family", clock) as family:
        fake = RecordingChannel("fake")
        family.dispatcher.register(fake)
        for name in ("bob", "cleo"):
            await make_user(family, name, timezone="America/New_York")
            said = make_inbound(f"/remind every Monday at 9 to call {name}'s mum", sender=name)
            await family.dispatcher.handle(said)
        done = await family.userdata.import_(target)
        assert done.user_id == 3
        for day, minute in ((16, 0), (16, 1), (23, 0)):  # a tick late changes nothing
            await jobs_of(family).plan_and_send(
                clock.set(datetime(2025, 6, day, 9, minute, tzinfo=ny))
            )
        keys = sorted(str(r.key) for r in await deliveries(family, "reminder"))
        listing = await family.dispatcher.handle(make_inbound("/reminders", sender="ana"))
    sent = [(m.address.chat_id, m.text) for m in fake.sent if m.kind == "reminder"]
    assert sorted(sent) == sorted(
        [("ana", "⏰ Reminder: water the fern")] * 2
        + [("bob", "⏰ Reminder: call bob's mum")] * 2
        + [("cleo", "⏰ Reminder: call cleo's mum")] * 2
    )
    # Her push from home came along under her new ids; her occurrences count on from it.
    assert keys == [f"reminder:{u}:{u}:{n}" for u in (1, 2) for n in (0, 1)] + [
        f"reminder:3:3:{n}" for n in (0, 1, 2)
    ]
    assert listing.reply is not None and "Mon 30 Jun 09:00 water the fern" in listing.reply


async def test_after_the_move_her_own_token_finds_her_history_and_no_one_else_does(
    tmp_path: Path,
) -> None:
    """Chat history imported at home, her API token made there: at the family lifebot her
    token's search finds her words with their source; Bob's token finds none of them."""
    from tests.support.app import add_user
    from tests.support.web import client_for

    chat = tmp_path / "chat.jsonl"
    lines = [
        {
            "id": "m1",
            "ts": "2024-05-03T10:00:00Z",
            "speaker": "me",
            "text": "I parked at the red gate",
        },
        {"id": "m2", "ts": "2024-05-03T10:01:00Z", "speaker": "me", "text": "Biscuit is my cat"},
    ]
    chat.write_text("".join(json.dumps(line) + "\n" for line in lines))
    home, family = tmp_path / "home" / "data", tmp_path / "family" / "data"
    app = await _started(home)
    try:
        ana = await add_user(app, "ana")
        _, anas_token = await app.web.auth.new_api_token(ana.id or 0, "phone")
    finally:
        await app.close()
    target = tmp_path / "ana.zip"
    for data_dir, args in (
        (home, ("import", str(chat), "--user", "ana")),
        (home, ("export", "--user", "ana", "-o", str(target))),
        (family, ("import", str(target))),
    ):
        if data_dir == family and args[0] == "import":
            app = await _started(family)
            try:
                bob = await add_user(app, "bob")
                await add_user(app, "cleo")
                _, bobs_token = await app.web.auth.new_api_token(bob.id or 0, "laptop")
            finally:
                await app.close()
        code, out, err = await run_cli(*args, cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(data_dir)})
        assert code == 0, out + err

    app = await _started(family)
    try:
        async with client_for(app) as client:
            found = {}
            for who, token in (("ana", anas_token), ("bob", bobs_token)):
                got = await client.get(
                    "/api/v1/memory/search",
                    params={"q": "red gate"},
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert got.status_code == 200, got.text
                found[who] = got.json()["items"]
            me = await client.get("/api/v1/me", headers={"Authorization": f"Bearer {anas_token}"})
        from storage.models import Message

        async with app.db.session() as s:
            source = await s.get(Message, found["ana"][0]["source_id"])
    finally:
        await app.close()
    assert me.status_code == 200 and me.json()["name"] == "ana"
    assert [h["text"] for h in found["ana"]][:1] == ["I parked at the red gate"]
    assert source is not None and (source.user_id, source.text) == (3, "I parked at the red gate")
    assert str(source.id) in found["ana"][0]["link"]  # the page that opens her source
    assert not any("red gate" in h["text"] for h in found["bob"])


async def test_her_uploaded_pdf_and_photo_move_with_her_and_go_with_her(tmp_path: Path) -> None:
    """Uploaded through the API at home; at the family lifebot, beside Bob's own upload,
    her PDF is found by her token (not Bob's), and `users delete` takes her files, not his."""
    from tests.support.app import add_user
    from tests.support.documents import pdf
    from tests.support.web import client_for

    lease = pdf("Flat lease", "The monthly rent is 950 EUR, paid by the 5th")
    photo = b"\x89PNG\r\n\x1a\n a whiteboard " + bytes(range(256))

    async def upload(app: App, name: str, files: list[tuple[str, bytes, str]]) -> str:
        user = await add_user(app, name)
        _, token = await app.web.auth.new_api_token(user.id or 0, "phone", "write")
        auth = {"Authorization": f"Bearer {token}"}
        async with client_for(app) as client:
            for file in files:
                sent = await client.post("/api/v1/uploads", files={"file": file}, headers=auth)
                assert sent.status_code == 201, sent.text
        return token

    home, family = tmp_path / "home" / "data", tmp_path / "family" / "data"
    app = await _started(home)
    try:
        anas = await upload(
            app, "ana", [("lease.pdf", lease, "application/pdf"), ("board.png", photo, "image/png")]
        )
    finally:
        await app.close()
    target = tmp_path / "ana.zip"
    code, out, err = await run_cli(
        "export", "--user", "ana", "-o", str(target), cwd=tmp_path,
        env={"LIFEBOT_DATA_DIR": str(home)},
    )  # fmt: skip
    assert code == 0 and "2 stored files" in out, out + err
    app = await _started(family)
    try:
        bobs = await upload(
            app, "bob", [("bob.pdf", pdf("Bob's gym", "Gym at 7"), "application/pdf")]
        )
        await upload(app, "cleo", [])  # (her id is 2: Ana becomes user 3)
    finally:
        await app.close()
    env = {"LIFEBOT_DATA_DIR": str(family)}
    code, out, err = await run_cli("import", str(target), cwd=tmp_path, env=env)
    assert code == 0 and "2 stored files" in out, out + err

    app = await _started(family)
    try:
        async with client_for(app) as client:

            async def search(token: str, q: str) -> list[str]:
                got = await client.get(
                    "/api/v1/memory/search",
                    params={"q": q},
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert got.status_code == 200, got.text
                return [h["text"] for h in got.json()["items"]]

            assert any("950 EUR" in t for t in await search(anas, "monthly rent"))
            assert not any("950 EUR" in t for t in await search(bobs, "monthly rent"))
            keys = {k: [i.key for i in await app.files.listing(k)] for k in ("documents", "photos")}
            assert sorted(k.split("/")[0] for k in keys["documents"]) == ["1", "3"]
            assert [k.split("/")[0] for k in keys["photos"]] == ["3"]
            assert await app.files.get("photos", keys["photos"][0]) == photo
    finally:
        await app.close()
    code, out, err = await run_cli("users", "delete", "ana", "--yes", cwd=tmp_path, env=env)
    assert code == 0, out + err
    app = await _started(family)
    try:
        left = {k: [i.key for i in await app.files.listing(k)] for k in ("documents", "photos")}
        assert [k.split("/")[0] for k in left["documents"]] == ["1"]
        assert left["photos"] == []
        async with client_for(app) as client:
            got = await client.get(
                "/api/v1/memory/search",
                params={"q": "gym"},
                headers={"Authorization": f"Bearer {bobs}"},
            )
        assert any("Gym at 7" in h["text"] for h in got.json()["items"])
    finally:
        await app.close()


async def test_a_running_lifebot_never_searches_a_deleted_persons_words_for_whoever_gets_her_id(
    tmp_path: Path,
) -> None:
    """`serve` keeps each searched user's memory in its own memory. Ana (user 2) is deleted
    with `lifebot users delete`, another process, and Zed moves in with `lifebot import`:
    on SQLite he gets her freed id 2. The running lifebot searched as her before; searching
    as him it must find his words, and never hers."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from tests.support.app import add_user

    def chat(name: str, *texts: str) -> Path:
        path = tmp_path / f"{name}.jsonl"
        rows = [
            {"id": f"m{n}", "ts": f"2024-05-0{n + 1}T10:00:00Z", "speaker": "me", "text": t}
            for n, t in enumerate(texts)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    zed_home = tmp_path / "zed" / "data"
    app = await _started(zed_home)
    try:
        await add_user(app, "zed")
    finally:
        await app.close()
    zed_zip = tmp_path / "zed.zip"
    for args in (
        ("import", str(chat("zed", "Zed likes the blue door")), "--user", "zed"),
        ("export", "--user", "zed", "-o", str(zed_zip)),
    ):
        code, out, err = await run_cli(*args, cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(zed_home)})
        assert code == 0, out + err

    family = tmp_path / "family" / "data"
    env = {"LIFEBOT_DATA_DIR": str(family)}
    serving = await _started(family)
    try:
        await add_user(serving, "bob")
        await add_user(serving, "ana")
        # Bob's history first: Ana's rows have the highest ids, the ones Zed's will get.
        for args in (
            ("import", str(chat("bob", "Bob waters the fern", "Bob fixes bikes")), "--user", "bob"),
            ("import", str(chat("ana", "I parked at the red gate")), "--user", "ana"),
        ):
            code, out, err = await run_cli(*args, cwd=tmp_path, env=env)
            assert code == 0, out + err

        async def search(user_id: int, q: str) -> list[str]:
            found = await serving.memory.retriever.search(
                user_id, q, now=datetime.now(UTC), tz=ZoneInfo("UTC"), limit=5
            )
            return [e.item.text for e in found.evidence]

        assert await search(2, "red gate") == ["I parked at the red gate"]
        moves: list[tuple[str, ...]] = [
            ("users", "delete", "ana", "--yes"),
            ("import", str(zed_zip)),
        ]
        for move in moves:
            code, out, err = await run_cli(*move, cwd=tmp_path, env=env)
            assert code == 0, out + err
        assert out.startswith("Imported zed as user 2 (was 1)")

        assert await search(2, "blue door") == ["Zed likes the blue door"]
        assert await search(2, "red gate") == []
    finally:
        await serving.close()


async def test_the_owner_of_her_own_lifebot_is_not_an_owner_of_the_family_one(
    tmp_path: Path,
) -> None:
    """Ana owned the lifebot she leaves (she was its first user). Moved to the family's,
    where Bob is the owner, she is one of its people: she may not approve strangers' pairing
    codes nor open the owner's pages. Into an empty lifebot she is its owner again."""
    home, family, empty = (tmp_path / n / "data" for n in ("home", "family", "empty"))
    target = tmp_path / "ana.zip"
    steps: list[tuple[Path, tuple[str, ...]]] = [
        (home, ("users", "add", "ana")),
        (home, ("export", "--user", "ana", "-o", str(target))),
        (family, ("users", "add", "bob")),
        (family, ("users", "add", "cleo")),
        (family, ("import", str(target))),
        (empty, ("import", str(target))),
    ]
    for data_dir, args in steps:
        code, out, err = await run_cli(*args, cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(data_dir)})
        assert code == 0, out + err
    owners = {}
    for data_dir in (home, family, empty):
        app = await _started(data_dir)
        try:
            async with app.db.engine.connect() as conn:
                from storage.models import User

                users = User.__table__  # type: ignore[attr-defined]
                q = select(users.c.display_name).where(users.c.is_owner)
                owners[data_dir.parent.name] = (await conn.execute(q)).scalars().all()
        finally:
            await app.close()
    assert owners == {"home": ["ana"], "family": ["bob"], "empty": ["ana"]}


async def test_a_calendar_file_both_people_imported_does_not_stop_her_move(tmp_path: Path) -> None:
    """Ana (user 1 at home) and Bob (user 1 at the family's) each imported the family's
    calendar file: she moves in with her copy of its events (the import was refused: the
    uid hashed the owner's and the calendar's ids), and a re-read there finds them."""
    ics = tmp_path / "family.ics"
    ics.write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
        "UID:school-play@family\r\nDTSTART:20261210T170000Z\r\nDTEND:20261210T183000Z\r\n"
        "SUMMARY:School play\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    home, family = tmp_path / "home" / "data", tmp_path / "family" / "data"
    target = tmp_path / "ana.zip"
    steps: list[tuple[Path, tuple[str, ...]]] = [
        (home, ("users", "add", "ana")),
        (home, ("calendar", "import", str(ics), "--user", "ana")),
        (home, ("export", "--user", "ana", "-o", str(target))),
        (family, ("users", "add", "bob")),
        (family, ("users", "add", "cleo")),
        (family, ("calendar", "import", str(ics), "--user", "bob")),
        (family, ("import", str(target))),
    ]
    for data_dir, args in steps:
        code, out, err = await run_cli(*args, cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(data_dir)})
        assert code == 0, out + err
    assert out.startswith("Imported ana as user 3 (was 1): ") and "1 event" in out
    # Her file read again there finds her moved event: nothing new, nothing doubled.
    env = {"LIFEBOT_DATA_DIR": str(family)}
    code, out, err = await run_cli(
        "calendar", "import", str(ics), "--user", "ana", cwd=tmp_path, env=env
    )
    assert code == 0, out + err
    assert "0 new, 0 changed, 0 removed, 1 unchanged" in out


async def test_an_event_stored_by_an_older_version_is_found_by_a_re_read_not_doubled(
    tmp_path: Path,
) -> None:
    """Outside events stored before their uid held the ids as text: a re-read of the file
    finds each (one row, now under the new uid), rather than adding it again."""
    import hashlib

    from sqlalchemy import update

    from storage.models import CalendarEvent

    ics = tmp_path / "family.ics"
    ics.write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
        "UID:school-play@family\r\nDTSTART:20261210T170000Z\r\nDTEND:20261210T183000Z\r\n"
        "SUMMARY:School play\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    data = tmp_path / "data"
    env = {"LIFEBOT_DATA_DIR": str(data)}
    for args in (("users", "add", "ana"), ("calendar", "import", str(ics), "--user", "ana")):
        code, out, err = await run_cli(*args, cwd=tmp_path, env=env)
        assert code == 0, out + err
    app = await _started(data)
    try:
        events = CalendarEvent.__table__  # type: ignore[attr-defined]
        async with app.db.engine.begin() as conn:
            (uid,) = (await conn.execute(select(events.c.uid))).scalars().all()
            key = "school-play@family"  # how the older version hashed it, ids and all
            older = hashlib.sha256(f"1|import|{key}".encode()).hexdigest()[:40] + "@import.lifebot"
            await conn.execute(update(events).values(uid=older))
    finally:
        await app.close()
    code, out, err = await run_cli(
        "calendar", "import", str(ics), "--user", "ana", cwd=tmp_path, env=env
    )
    assert code == 0, out + err
    assert "0 new, 0 changed, 0 removed, 1 unchanged" in out
    app = await _started(data)
    try:
        async with app.db.engine.connect() as conn:
            assert (await conn.execute(select(events.c.uid))).scalars().all() == [uid]
    finally:
        await app.close()


async def test_an_export_cut_short_is_named_a_damaged_export_not_read_as_chat_history(
    export_zip: Path, tmp_path: Path
) -> None:
    """A download that broke off: its start is a zip's, its end (the zip's directory) is
    missing. It was taken for chat history ("needs --user"; with it, every line refused)."""
    cut = tmp_path / "ana.zip"
    whole = await asyncio.to_thread(export_zip.read_bytes)
    await asyncio.to_thread(cut.write_bytes, whole[:3000])
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    code, out, err = await run_cli("users", "add", "bob", cwd=tmp_path, env=env)
    assert code == 0, out + err
    code, out, err = await run_cli("import", str(cut), cwd=tmp_path, env=env)
    assert code == 1 and "Traceback" not in err, out + err
    assert err.startswith(f"error: {cut} is a damaged zip") and "nothing was imported" in err
    code, out, err = await run_cli("import", str(cut), "--user", "bob", cwd=tmp_path, env=env)
    assert code == 2 and "lifebot export" in err, out + err


@asynccontextmanager
async def _imported(export: Path, tmp_path: Path) -> AsyncIterator[App]:
    """A new lifebot (SQLite) into which ``lifebot import`` loaded ``export``, running."""
    data = tmp_path / "data"
    app = await _started(data)
    try:
        code, out, err = await run_cli(
            "import", str(export), cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(data)}
        )
        assert code == 0, out + err
        yield app
    finally:
        await app.close()


async def test_an_export_holding_one_fact_twice_is_imported_with_one_live_copy(
    export_zip: Path, tmp_path: Path
) -> None:
    """Older versions could keep the same fact twice (two requests at once, or a forget undone
    after the words were stored again); the database now holds one live fact per wording, and
    such an export was refused whole. The later copy is kept as replaced by the first, as the
    upgrade of an existing database settles them."""

    def twice(tables: Rows, _bobs: dict[str, Any]) -> None:
        [fact] = tables["fact"]
        fact.update(forgotten_at=None, superseded_by=None)
        tables["fact"].append({**fact, "id": int(fact["id"]) + 1000})

    crafted = _edited(export_zip, tmp_path / "twice.zip", twice, {})
    async with _imported(crafted, tmp_path) as app, app.db.session() as s:
        facts = (await s.exec(select_rows(Fact).order_by(col(Fact.id)))).all()
    assert len(facts) == 2
    first, later = facts
    assert first.superseded_by is None and first.forgotten_at is None  # the one live copy
    assert later.superseded_by == first.id


async def test_an_export_holding_one_calendar_twice_is_imported_as_one(
    export_zip: Path, tmp_path: Path
) -> None:
    """Older versions could link one address twice (subscribes at once), each copy holding
    the feed's events again; the database now holds one calendar per person, kind and
    address, and such an export was refused whole. The copy merges into the first, as the
    upgrade of an existing database merges them: its events the first has go, the rest
    move over."""

    def twice(tables: Rows, _bobs: dict[str, Any]) -> None:
        [source] = tables["calendarsource"]
        source["kind"] = "ics"
        copy = {**source, "id": int(source["id"]) + 1000}
        tables["calendarsource"].append(copy)
        tag, copy_tag = f"{source['kind']}:{source['id']}", f"{copy['kind']}:{copy['id']}"
        front = f"{source['user_id']}/{tag}/"
        [event] = tables["calendarevent"]
        event.update(source=tag, uid=f"{front}standup@ics.lifebot")
        tables["calendarevent"] += [
            {**event, "id": int(event["id"]) + 1000, "source": copy_tag,
             "uid": event["uid"].replace(tag, copy_tag)},
            {**event, "id": int(event["id"]) + 2000, "source": copy_tag, "title": "Only here",
             "title_key": "only here", "uid": f"{source['user_id']}/{copy_tag}/only@x.lifebot"},
        ]  # fmt: skip

    crafted = _edited(export_zip, tmp_path / "twice.zip", twice, {})
    async with _imported(crafted, tmp_path) as app, app.db.session() as s:
        [source] = (await s.exec(select_rows(CalendarSource))).all()
        events = (await s.exec(select_rows(CalendarEvent))).all()
    tag = f"{source.kind}:{source.id}"
    from_it = sorted(e.title for e in events if e.source == tag)
    assert len(from_it) == 2 and "Only here" in from_it, [(e.source, e.uid) for e in events]
    assert all(e.uid.startswith(f"{source.user_id}/{tag}/") for e in events if e.source == tag)


async def test_an_export_holding_one_contact_twice_in_different_cases_is_imported_as_one(
    export_zip: Path, tmp_path: Path
) -> None:
    """Older versions could store "Anna" and "anna" together (requests at once); the database
    now holds one contact per person and name in any case, and such an export was refused
    whole. The twin merges into the first, as the upgrade of an existing database merges
    them: the first keeps its spelling and gains what only the twin knew."""

    def twice(tables: Rows, _bobs: dict[str, Any]) -> None:
        [contact] = tables["contact"]
        contact.update(name="Anna", aliases="", reach="")
        tables["contact"].append(
            {**contact, "id": int(contact["id"]) + 1000, "name": "anna", "reach": "a@x.org"}
        )

    crafted = _edited(export_zip, tmp_path / "twice.zip", twice, {})
    async with _imported(crafted, tmp_path) as app, app.db.session() as s:
        contacts = (await s.exec(select_rows(Contact))).all()
    assert [(c.name, c.reach) for c in contacts] == [("Anna", "a@x.org")]


async def test_an_older_export_holding_one_contact_twice_in_accented_cases_is_imported_as_one(
    export_zip: Path, tmp_path: Path
) -> None:
    """An export written before contacts had a name key (0028) holds none, and on SQLite it
    could hold "Ângela" and "ângela" (lower() folded only ASCII). The twin merges into the
    first, and what comes in gets its name's key: adding "ÂNGELA" after finds her."""
    from storage.repos.people import ContactRepo

    def twice(tables: Rows, _bobs: dict[str, Any]) -> None:
        [contact] = tables["contact"]
        contact.update(name="Ângela", aliases="", reach="")
        contact.pop("name_key", None)
        twin = {**contact, "id": int(contact["id"]) + 1000, "name": "ângela", "reach": "a@x.org"}
        tables["contact"].append(twin)
        tables["manifest"]["columns"]["contact"].pop("name_key", None)  # type: ignore[call-overload]

    crafted = _edited(export_zip, tmp_path / "older.zip", twice, {})
    async with _imported(crafted, tmp_path) as app:
        async with app.db.session() as s:
            contacts = (await s.exec(select_rows(Contact))).all()
            assert [(c.name, c.name_key, c.reach) for c in contacts] == [
                ("Ângela", "ângela", "a@x.org")
            ]
            _, made = await ContactRepo(s).put(contacts[0].user_id, "ÂNGELA", relationship="x")
        assert not made


def _with_photos(source: Path, target: Path, count: int) -> Path:
    """``source`` with ``count`` more photos of 1 MB of her first message's."""
    import os
    import shutil

    shutil.copyfile(source, target)
    with zipfile.ZipFile(target, "a") as zf:
        user = json.loads(zf.read("user.json"))[0]["id"]
        message = json.loads(zf.read("message.json"))[0]["id"]
        for n in range(1, count + 1):
            zf.writestr(f"files/photos/{user}/{message}-{n}.jpg", os.urandom(1 << 20))
    return target


@pytest.mark.parametrize("stored_files", [0, 1], ids=["while rows go in", "while files go in"])
async def test_an_import_whose_database_connection_drops_says_so_and_leaves_nothing(
    stored_files: int, export_zip: Path, tmp_path: Path, postgres_url: str
) -> None:
    """The database ends the import's connection half way (a restart, a network cut; here an
    administrator's pg_terminate_backend): the person read "a value does not fit its
    column", as if her export were damaged. She is told the database could not be reached
    and the import was not applied; nothing of it is kept. Cut while its files go in, the
    commit is what fails: a new connection finds the import's user was not saved."""
    from sqlalchemy import text

    big = _with_photos(export_zip, tmp_path / "big.zip", 40)  # the import takes a while
    family = tmp_path / "family" / "data"
    app = await _started(family, postgres_url)
    try:
        await _person(app, "bob", salt=2)
        before = await _state(app)
        env = {"LIFEBOT_DATA_DIR": str(family), "LIFEBOT_DATABASE_URL": postgres_url}
        importing = asyncio.create_task(run_cli("import", str(big), cwd=tmp_path, env=env))
        ended = False
        holder = text(  # the import's transaction: the only one that has written a user
            "SELECT pid FROM pg_locks WHERE relation = '\"user\"'::regclass "
            "AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid() "
            "AND (SELECT count(*) FROM storedfile) >= :files"
        )
        files = before["storedfile"] + stored_files
        while not importing.done() and not ended:
            async with app.db.engine.connect() as conn:
                for (pid,) in (await conn.execute(holder, {"files": files})).all():
                    await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                    ended = True
            await asyncio.sleep(0.01)
        code, out, err = await importing
        assert ended, "the import ended before its connection could be cut"
        assert code == 1 and "Traceback" not in err, out + err
        assert "does not fit" not in err, err
        assert "could not be reached" in err and "nothing was imported" in err, err
        assert await _state(app) == before
    finally:
        await app.close()
