"""The data seams of the feature contract (issue 28), walked over the registry.

Every table a feature declares and every kind of file it declares goes through export,
import, delete-my-data, backup and restore, on SQLite and on PostgreSQL. The rows are made
from each table's columns (``tests/support/rows.py``) and the files from each declared kind,
so a feature registered tomorrow is covered here without editing this file.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import resource
import signal
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, insert, select
from sqlmodel import SQLModel

from bot.app.build import App, build_app, start_app
from bot.app.features import REGISTRY
from bot.app.logs import setup_logging
from bot.device.spool import Spool
from bot.messages import Attachment
from storage.db import Database
from storage.files import BadKey, FileStore, StoredInfo, UndeclaredKind
from storage.models import StoredFile, User, utcnow
from storage.portable import ExportFileError, UserData
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user, make_settings
from tests.support.builders import make_inbound
from tests.support.cli import lifebot_script, run_cli, run_lifebot
from tests.support.device import add_device
from tests.support.documents import pdf
from tests.support.omi import post_chunk
from tests.support.rows import expected_rows, fill, ids_of, rows_of
from tests.support.web import client_for, sign_in

TABLES = set(REGISTRY.user_tables())
REFS = REGISTRY.references()
LEASE = pdf("Tenancy agreement", "The rent is 950 EUR a month")


def key_of(kind_name: str, user_id: int, ids: dict[str, Any] | None = None) -> str:
    """A key of a declared kind for ``user_id`` (per-user kinds start with the owner's id).

    With ``ids`` (the rows made for the user), a key of the kind's declared shape holding
    them (``{user}/{message}-``), as the feature would write it.
    """
    kind = REGISTRY.file_kind(kind_name)
    if not kind.per_user:
        return f"{user_id}/gen.chunk"
    if ids is None or not kind.key_ids:
        return f"{user_id}/gen-{kind_name}.bin"
    start = re.sub(r"\{([a-z_]+)\}", lambda m: str(ids[m.group(1)]), kind.key_ids)
    return f"{start}gen-{kind_name}.bin"


def content(kind: str, user_id: int) -> bytes:
    """Distinct bytes for each kind and user (all 256 byte values in them)."""
    return f"{kind}:{user_id}:".encode() + bytes(range(256))


async def put_every_kind(app: App, user_id: int, ids: dict[str, Any] | None = None) -> None:
    """One file of every declared kind for ``user_id``."""
    for kind in REGISTRY.file_kinds():
        key = key_of(kind.name, user_id, ids)
        await app.files.put(kind.name, key, content(kind.name, user_id))


def without_hooks(app: App) -> UserData:
    """The app's export and import without memory's after-import pass."""
    return UserData(
        db=app.db,
        files=app.files,
        tables=app.userdata.tables,
        clock=app.clock,
        spool_dir=app.userdata.spool_dir,
        work_dir=app.userdata.work_dir,
        references=REFS,
    )


async def bare_user(app: App, name: str) -> int:
    """A user row and nothing else (its rows are the generated ones only)."""
    async with app.db.engine.begin() as conn:
        users = User.__table__  # type: ignore[attr-defined]
        q = insert(users).values(display_name=name, created_at=utcnow()).returning(users.c.id)
        return int((await conn.execute(q)).scalar_one())


@pytest.fixture
async def db_app(app_factory: AppFactory, app_database_url: str) -> App:
    """A started app on SQLite or PostgreSQL, holding nothing yet (no model: nothing to ask)."""
    return await app_factory(database_url_setting=app_database_url)


async def test_every_user_table_and_file_kind_round_trips_and_is_deleted(
    db_app: App, tmp_path: Path
) -> None:
    app = db_app
    ana = User(id=await bare_user(app, "ana"))
    bob = User(id=await bare_user(app, "bob"))
    assert ana.id is not None and bob.id is not None
    async with app.db.engine.begin() as conn:
        anas_ids = await fill(conn, TABLES, ana.id, salt=1, references=REFS)
        await fill(conn, TABLES, bob.id, salt=2, references=REFS)
    async with app.db.engine.connect() as conn:
        before_rows = await rows_of(conn, TABLES, ana.id)
        bobs = await rows_of(conn, TABLES, bob.id)
    assert all(before_rows.values()), "a generated row in every table"
    assert before_rows == expected_rows(TABLES, ana.id, 1, anas_ids, REFS)
    await put_every_kind(app, ana.id, anas_ids)
    await put_every_kind(app, bob.id)

    # --- export: every table, every lasting kind of file, nothing of Bob's ---------------
    target = tmp_path / "out" / "ana.zip"
    done = await app.userdata.export(ana.id, target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with zipfile.ZipFile(target) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        tables = {t: json.loads(zf.read(f"{t}.json")) for t in TABLES}
        files = {n: zf.read(n) for n in names if n.startswith("files/")}
    assert {t: len(r) for t, r in tables.items()} == {t: len(r) for t, r in before_rows.items()}
    assert set(manifest["columns"]) >= TABLES
    exported = {k.name for k in REGISTRY.file_kinds() if k.per_user and not k.derived}
    assert {f"files/{k}/{key_of(k, ana.id, anas_ids)}" for k in exported} == set(files)
    assert all(
        files[f"files/{k}/{key_of(k, ana.id, anas_ids)}"] == content(k, ana.id) for k in exported
    )
    assert done.files == dict.fromkeys(exported, 1)
    assert f":{bob.id}:".encode() not in b"".join(files.values())

    # --- delete: every row and every per-user file of Ana's, caches included; Bob's stay ---
    gone = await app.userdata.delete(ana.id)
    assert gone.rows["user"] == 1
    async with app.db.engine.connect() as conn:
        assert all(not rows for rows in (await rows_of(conn, TABLES, ana.id)).values())
        assert await rows_of(conn, TABLES, bob.id) == bobs
    for kind in REGISTRY.file_kinds():
        left = await app.files.stat(kind.name, key_of(kind.name, ana.id, anas_ids))
        assert (left is None) == kind.per_user, kind.name
        assert await app.files.stat(kind.name, key_of(kind.name, bob.id)) is not None

    # --- import: the same rows, value for value, under new ids, and the lasting files -------
    # (Without memory's after-import pass, which re-embeds vectors of another model.)
    back = await without_hooks(app).import_(target)
    assert back.user_id != ana.id and back.old_user_id == ana.id
    async with app.db.engine.connect() as conn:
        new_ids = await ids_of(conn, TABLES, back.user_id)
        assert await rows_of(conn, TABLES, back.user_id) == expected_rows(
            TABLES, back.user_id, 1, new_ids, REFS
        )
    for name in exported:
        got = await app.files.get(name, key_of(name, back.user_id, new_ids))
        assert got == content(name, ana.id)
    with pytest.raises(ExportFileError, match="already has a user named ana"):
        await app.userdata.import_(target)


async def test_an_export_goes_into_a_database_of_other_people_under_new_ids(
    db_app: App, tmp_path: Path
) -> None:
    """Ana's rows, references and files come in beside Cleo and Dan, whose rows have the
    very ids Ana's had: every one of hers is new, every reference points at hers."""
    app = db_app
    ana = User(id=await bare_user(app, "ana"))
    bob = User(id=await bare_user(app, "bob"))
    assert ana.id is not None and bob.id is not None
    async with app.db.engine.begin() as conn:
        anas_ids = await fill(conn, TABLES, ana.id, salt=1, references=REFS)
        await fill(conn, TABLES, bob.id, salt=2, references=REFS)
    await put_every_kind(app, ana.id, anas_ids)
    target = tmp_path / "ana.zip"
    await app.userdata.export(ana.id, target)
    await app.userdata.delete(ana.id)

    # The database Ana moves to: Cleo has Ana's old user id, Dan rows of Ana's old ids.
    async with app.db.engine.begin() as conn:
        cleo = {"id": ana.id, "display_name": "cleo", "created_at": utcnow()}
        await conn.execute(insert(User.__table__).values(**cleo))  # type: ignore[attr-defined]
        await fill(conn, TABLES, ana.id, salt=3, references=REFS)
    dan = User(id=await bare_user(app, "dan"))
    assert dan.id is not None
    first = min(v for k, v in anas_ids.items() if k != "user" and isinstance(v, int)) - 1
    async with app.db.engine.begin() as conn:
        dans_ids = await fill(conn, TABLES, dan.id, salt=4, references=REFS, first_id=first)
    assert {k: v for k, v in dans_ids.items() if k != "user" and isinstance(v, int)} == {
        k: v for k, v in anas_ids.items() if k != "user" and isinstance(v, int)
    }, "Dan's rows have exactly Ana's old ids"
    await put_every_kind(app, dan.id, dans_ids)
    async with app.db.engine.connect() as conn:
        others = {u: await rows_of(conn, TABLES, u) for u in (ana.id, bob.id, dan.id)}

    # (Without memory's after-import pass, which re-embeds vectors of another model.)
    back = await without_hooks(app).import_(target)
    assert back.old_user_id == ana.id and back.user_id not in (ana.id, bob.id, dan.id)
    async with app.db.engine.connect() as conn:
        new_ids = await ids_of(conn, TABLES, back.user_id)
        # Every row, value for value, with its own id, its foreign keys and every declared
        # reference (lists of ids, ids in JSON, ids in text) pointing at Ana's new rows.
        assert await rows_of(conn, TABLES, back.user_id) == expected_rows(
            TABLES, back.user_id, 1, new_ids, REFS
        )
        assert {u: await rows_of(conn, TABLES, u) for u in others} == others, "untouched"
    clash = {t for t, v in new_ids.items() if t != "user" and v == anas_ids[t]}
    assert clash <= {t for t, v in anas_ids.items() if not isinstance(v, int)}, clash
    exported = [k for k in REGISTRY.file_kinds() if k.per_user and not k.derived]
    for kind in exported:
        got = await app.files.get(kind.name, key_of(kind.name, back.user_id, new_ids))
        assert got == content(kind.name, ana.id)
        dans = await app.files.get(kind.name, key_of(kind.name, dan.id, dans_ids))
        assert dans == content(kind.name, dan.id)


async def test_an_import_that_would_merge_two_people_is_refused_and_leaves_nothing(
    db_app: App, tmp_path: Path
) -> None:
    app = db_app
    ana = User(id=await bare_user(app, "ana"))
    assert ana.id is not None
    async with app.db.engine.begin() as conn:
        anas_ids = await fill(conn, TABLES, ana.id, salt=1, references=REFS)
    await put_every_kind(app, ana.id, anas_ids)
    target = tmp_path / "ana.zip"
    await app.userdata.export(ana.id, target)

    async def state() -> tuple[dict[str, int], set[str]]:
        async with app.db.engine.connect() as conn:
            counts = {
                t.name: int((await conn.execute(select(func.count()).select_from(t))).scalar() or 0)
                for t in SQLModel.metadata.sorted_tables
                if t.name in TABLES or t.name == "user"
            }
        keys = {
            f"{k.name}/{i.key}"
            for k in REGISTRY.file_kinds()
            for i in await app.files.listing(k.name)
        }
        return counts, keys

    before = await state()
    # Ana is still here: under another name, her Telegram account and pendant are hers.
    with pytest.raises(ExportFileError, match="already has a user named ana") as named:
        await app.userdata.import_(target)
    assert "--as" in str(named.value)
    with pytest.raises(ExportFileError, match=r"channelidentity .* already belongs to ana") as same:
        await app.userdata.import_(target, name="ana two")
    assert "never merges two people" in str(same.value)
    assert await state() == before

    # A damaged file half way: the rows are rolled back, the files already put are taken back.
    broken = tmp_path / "broken.zip"
    raw = bytearray(target.read_bytes())
    with zipfile.ZipFile(target) as zf:
        members = [i for i in zf.infolist() if i.filename.startswith("files/")]
        assert len(members) >= 2
        last = members[-1]
        name_len, extra_len = (
            int.from_bytes(raw[last.header_offset + 26 : last.header_offset + 28], "little"),
            int.from_bytes(raw[last.header_offset + 28 : last.header_offset + 30], "little"),
        )
        at = last.header_offset + 30 + name_len + extra_len
        raw[at] ^= 0xFF  # its CRC no longer matches: the file cannot be read back
    broken.write_bytes(bytes(raw))
    last_name = last.filename
    await app.userdata.delete(ana.id)
    emptied = await state()
    with pytest.raises(ExportFileError, match=re.escape(last_name)):
        await app.userdata.import_(broken)
    assert await state() == emptied
    done = await app.userdata.import_(target)
    assert done.name == "ana" and done.rows["message"] == 1


async def test_the_web_page_and_the_api_download_the_same_whole_export(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """A journal entry (a date column) and a photo: the download used to answer 500."""
    app = await app_factory(fake_llm)
    ana = await add_user(app, "ana")
    assert ana.id is not None
    async with app.db.engine.begin() as conn:
        await fill(conn, TABLES, ana.id, salt=3)
    await put_every_kind(app, ana.id)
    _, token = await app.web.auth.new_api_token(ana.id, "export")
    async with client_for(app) as client:
        await sign_in(app, client, ana)
        page = await client.get("/export")
        api = await client.get("/api/v1/export", headers={"Authorization": f"Bearer {token}"})
    for got in (page, api):
        assert got.status_code == 200, got.text
        assert got.headers["content-type"] == "application/zip"
        with zipfile.ZipFile(io.BytesIO(got.content)) as zf:
            journal = json.loads(zf.read("journalentry.json"))
            photo = zf.read(f"files/photos/{key_of('photos', ana.id)}")
            assert {f"{t}.json" for t in TABLES} <= set(zf.namelist())
        assert journal[0]["day"] == "2024-03-03"  # the leap day plus the salt, as ISO text
        assert photo == content("photos", ana.id)
    # Nothing of the downloads stays behind on the server.
    assert not [p for p in (app.settings.data_dir / "tmp").rglob("*") if p.is_file()]


def _modes(root: Path) -> Iterator[tuple[Path, int]]:
    for path in [root, *root.rglob("*")]:
        yield path, stat.S_IMODE(path.lstat().st_mode)


def loose_modes(root: Path) -> list[str]:
    """Every folder not 0700 and file not 0600 under ``root``."""
    return [
        f"{p.relative_to(root.parent)} {oct(mode)}"
        for p, mode in _modes(root)
        if (p.is_dir() and mode != 0o700) or (p.is_file() and mode != 0o600)
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def two_databases(request: pytest.FixtureRequest) -> tuple[str | None, str | None]:
    """The database of a lifebot and an empty one to restore it into (None: SQLite in the
    data folder)."""
    if request.param == "sqlite":
        return None, None
    return request.getfixturevalue("postgres_url"), request.getfixturevalue("another_postgres_url")


def _env(data_dir: Path, url: str | None) -> dict[str, str]:
    return {"LIFEBOT_DATA_DIR": str(data_dir), **({"LIFEBOT_DATABASE_URL": url} if url else {})}


async def _started(data_dir: Path, url: str | None) -> App:
    app = build_app(make_settings(data_dir.parent, data_dir=data_dir, database_url_setting=url))
    await start_app(app)
    return app


SESSION = "s-backup-0001"


async def test_every_kind_of_file_is_in_a_backup_and_back_after_a_restore(
    tmp_path: Path, two_databases: tuple[str | None, str | None]
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    app = await _started(first, two_databases[0])
    try:
        ana = await add_user(app, "ana")
        assert ana.id is not None
        async with app.db.engine.begin() as conn:
            await fill(conn, TABLES, ana.id, salt=1)
        async with app.db.engine.connect() as conn:
            before = await rows_of(conn, TABLES, ana.id)
        await put_every_kind(app, ana.id)
        spool = first / "spool"
        spool.mkdir()
        (spool / f"{SESSION}.pcm").write_bytes(b"\x01\x00" * 800)
        (first / "SOUL.md").write_text("You are Ana's assistant.")
    finally:
        await app.close()

    code, out, err = await run_cli(
        "backup", "--to", str(tmp_path / "bk"), cwd=tmp_path, env=_env(first, two_databases[0])
    )
    assert code == 0, out + err
    assert out.startswith(f"Backed up to {tmp_path / 'bk'}/lifebot-backup-")
    (folder,) = (tmp_path / "bk").iterdir()
    lasting = [k.name for k in REGISTRY.file_kinds() if not k.derived]
    for kind in REGISTRY.file_kinds():
        copy = folder / "files" / kind.name / key_of(kind.name, ana.id)
        if kind.derived:
            assert not copy.exists(), f"{kind.name} is a cache: never backed up"
        else:
            assert copy.read_bytes() == content(kind.name, ana.id), kind.name
    assert (folder / "spool" / f"{SESSION}.pcm").exists()
    assert loose_modes(tmp_path / "bk") == []

    # Into an empty data folder (and an empty database): everything comes back.
    code, out, err = await run_cli(
        "restore", str(folder), cwd=tmp_path, env=_env(second, two_databases[1])
    )
    assert code == 0, out + err
    assert out.startswith(f"Restored {folder} into {second}")
    again = await _started(second, two_databases[1])
    try:
        async with again.db.engine.connect() as conn:
            assert await rows_of(conn, TABLES, ana.id) == before
        for name in lasting:
            assert await again.files.get(name, key_of(name, ana.id)) == content(name, ana.id)
        assert (second / "spool" / f"{SESSION}.pcm").read_bytes() == b"\x01\x00" * 800
        assert (second / "SOUL.md").read_text() == "You are Ana's assistant."
        if two_databases[1] is not None:  # on PostgreSQL the files are in the database
            async with again.db.engine.connect() as conn:
                stored = (await conn.execute(select(func.count()).select_from(StoredFile))).scalar()
            assert stored == len(lasting)
    finally:
        await again.close()
    assert loose_modes(second) == []

    # A second restore over it is refused in plain words, and changes nothing.
    code, out, err = await run_cli(
        "restore", str(folder), cwd=tmp_path, env=_env(second, two_databases[1])
    )
    assert code == 1
    assert "already holds data" in err and "restore into an empty one" in err


async def test_a_restore_refuses_what_is_not_a_whole_backup(tmp_path: Path) -> None:
    half = tmp_path / "bk" / "lifebot-backup-20250101-000000.partial"
    half.mkdir(parents=True)
    code, _, err = await run_cli(
        "restore", str(half), cwd=tmp_path, env=_env(tmp_path / "data", None)
    )
    assert code == 1
    assert "is not a lifebot backup" in err
    assert not (tmp_path / "data" / "lifebot.db").exists()


async def test_the_store_keeps_no_kind_no_feature_declared(app: App) -> None:
    with pytest.raises(UndeclaredKind, match="no registered feature declares"):
        await app.files.put("charts", "1/week.png", b"png")
    with pytest.raises(BadKey):
        await app.files.put("photos", "../1/escape.jpg", b"jpg")
    with pytest.raises(BadKey, match="owner's user id"):
        await app.files.put("photos", "nobody.jpg", b"jpg")
    assert not (app.settings.data_dir / "files").exists()
    assert {k.name for k in app.files.kinds()} == {k.name for k in REGISTRY.file_kinds()}


async def test_every_folder_and_file_lifebot_makes_in_its_data_folder_is_private(
    app: App, tmp_path: Path
) -> None:
    """0700 folders and 0600 files, after photos, documents, Omi, the spool, the log, the
    search cache, exports and backups; while the process's umask would give 0755/0644."""
    data = app.settings.data_dir
    old_umask = os.umask(0o022)
    log_file = data / "lifebot.log"
    log_file.write_text("from an older lifebot\n")
    log_file.chmod(0o644)
    try:
        setup_logging(app.settings, to_file=log_file)
        logging.getLogger("bot").warning("a line about Ana")
        ana = await add_user(app, "ana")
        picture = make_inbound("", sender="ana")
        picture.attachments.append(
            Attachment("image", mime_type="image/jpeg", data=b"\xff\xd8jpeg")
        )
        await app.dispatcher.handle(picture)
        lease = make_inbound("", sender="ana")
        lease.attachments.append(
            Attachment("document", mime_type="application/pdf", name="lease.pdf", data=LEASE)
        )
        await app.dispatcher.handle(lease)
        _, token = await add_device(app, "omi-1", ana)
        async with client_for(app) as web:
            assert (await post_chunk(web, token, b"\x00\x01" * 800, 16000)).status_code == 200
            await sign_in(app, web, ana)
            assert (await web.get("/export")).status_code == 200
        spooled = Spool(data / "spool").open("s-modes-1")
        spooled.append(np.zeros(1600, dtype=np.int16))
        spooled.close()
        env = {"LIFEBOT_DATA_DIR": str(data)}
        for args in (
            ("export", "--user", "ana", "-o", str(data / "exports" / "ana.zip")),
            ("backup", "--to", str(data / "backups")),
            ("memory", "search", "lease", "--user", "ana"),
        ):
            code, out, err = await run_cli(*args, cwd=tmp_path, env=env)
            assert code == 0, out + err
    finally:
        os.umask(old_umask)
        _drop_log_handlers()
    assert await app.files.listing("photos") and await app.files.listing("documents")
    assert await app.files.listing("omi-audio")
    assert list((data / "files" / "search-cache").rglob("*.npz"))
    assert loose_modes(data) == []


def _drop_log_handlers() -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "lifebot", False):
            root.removeHandler(handler)
            handler.close()


async def test_an_export_that_fails_half_way_leaves_no_zip_and_keeps_the_last_good_one(
    tmp_path: Path,
) -> None:
    """The disk fills up (a file size limit) while the zip is written: on main, the CLI
    left a truncated zip that looked like an export; now nothing replaces the good one."""
    data = tmp_path / "data"
    app = await _started(data, None)
    try:
        ana = await add_user(app, "ana")
        assert ana.id is not None
        await app.files.put("photos", f"{ana.id}/1-0.jpg", os.urandom(400_000))
    finally:
        await app.close()
    target = tmp_path / "ana.zip"
    env = {**os.environ, "LIFEBOT_DATA_DIR": str(data)}
    args = ("export", "--user", "ana", "-o", str(target))
    code, out, err = await run_lifebot(*args, cwd=tmp_path, env=env)
    assert code == 0, out + err
    good = target.read_bytes()

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    proc = await asyncio.create_subprocess_exec(
        str(lifebot_script()),
        *args,
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=small_disk,  # only sets a limit in the child
    )
    _, failed = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    assert b"error: could not write" in failed and b"Nothing was written" in failed
    assert b"Traceback" not in failed
    assert target.read_bytes() == good
    names = await asyncio.to_thread(os.listdir, tmp_path)
    assert [n for n in names if "ana" in n] == ["ana.zip"]  # no half-written .part either


async def test_an_import_that_fails_half_way_leaves_no_rows_and_no_files(tmp_path: Path) -> None:
    """The disk fills up (a file size limit) while `lifebot import` puts Ana's files back:
    the command says so, and the database and the store hold nothing of her."""
    home, family = tmp_path / "home", tmp_path / "family"
    app = await _started(home / "data", None)
    try:
        ana = await add_user(app, "ana")
        assert ana.id is not None
        await app.files.put("photos", f"{ana.id}/1-0.jpg", os.urandom(50_000))
        await app.files.put("photos", f"{ana.id}/2-0.jpg", os.urandom(3_000_000))
    finally:
        await app.close()
    target = tmp_path / "ana.zip"
    code, out, err = await run_lifebot(
        "export", "--user", "ana", "-o", str(target), cwd=tmp_path,
        env={"LIFEBOT_DATA_DIR": str(home / "data")},
    )  # fmt: skip
    assert code == 0, out + err
    app = await _started(family / "data", None)
    try:
        await add_user(app, "cleo")
    finally:
        await app.close()
    env = {**os.environ, "LIFEBOT_DATA_DIR": str(family / "data")}
    db_file = family / "data" / "lifebot.db"
    limit = max(1_000_000, 2 * db_file.stat().st_size) if db_file.exists() else 1_000_000

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = await asyncio.create_subprocess_exec(
        str(lifebot_script()), "import", str(target), cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, preexec_fn=small_disk,
    )  # fmt: skip
    said, failed = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, said + failed
    assert b"error:" in failed and b"2-0.jpg" in failed and b"Traceback" not in failed
    app = await _started(family / "data", None)
    try:
        async with app.db.engine.connect() as conn:
            users = User.__table__  # type: ignore[attr-defined]
            names = [r[0] for r in (await conn.execute(select(users.c.display_name))).all()]
        assert names == ["cleo"]
        assert await app.files.listing("photos") == []  # the first photo was taken back
    finally:
        await app.close()
    code, out, err = await run_lifebot("import", str(target), cwd=tmp_path, env=env)
    assert code == 0, out + err
    assert out.startswith("Imported ana as user 2 (was 1): no messages.")
    assert "2 stored files" in out


async def test_a_reference_to_a_row_the_export_lacks_points_at_nothing_not_at_another_person(
    db_app: App, tmp_path: Path
) -> None:
    """An id the export holds no row for must not land on whoever has that id here."""
    app = db_app
    ana = await bare_user(app, "ana")
    dan = await bare_user(app, "dan")
    async with app.db.engine.begin() as conn:
        anas = await fill(conn, TABLES, ana, salt=1, references=REFS)
        dans = await fill(conn, TABLES, dan, salt=2, references=REFS)
    target = tmp_path / "ana.zip"
    await without_hooks(app).export(ana, target)
    await app.userdata.delete(ana)

    # Her rows name Dan's message (as a damaged or hand-edited export could).
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(target) as zin, zipfile.ZipFile(edited, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename in ("fact.json", "message.json", "memorycursor.json"):
                rows = json.loads(data)
                for row in rows:
                    if info.filename == "fact.json":
                        row["source_message_ids"] = [dans["message"], anas["message"]]
                    elif info.filename == "message.json":
                        row["reply_to_id"] = dans["message"]
                    else:  # read up to a message past her last one: up to her last one
                        row["last_message_id"] = anas["message"] + 5
                data = json.dumps(rows).encode()
            zout.writestr(info, data)
    async with app.db.engine.connect() as conn:
        dans_rows = await rows_of(conn, TABLES, dan)
    back = await without_hooks(app).import_(edited)
    async with app.db.engine.connect() as conn:
        new = await ids_of(conn, TABLES, back.user_id)
        tables = {t.name: t for t in SQLModel.metadata.sorted_tables}
        fact = (
            await conn.execute(
                select(tables["fact"]).where(tables["fact"].c.user_id == back.user_id)
            )
        ).one()
        msg = (
            await conn.execute(
                select(tables["message"]).where(tables["message"].c.user_id == back.user_id)
            )
        ).one()
        cur = (
            await conn.execute(
                select(tables["memorycursor"]).where(
                    tables["memorycursor"].c.user_id == back.user_id
                )
            )
        ).one()
        assert await rows_of(conn, TABLES, dan) == dans_rows
    assert fact.source_message_ids == [new["message"]]  # Dan's message is not her source
    assert msg.reply_to_id is None
    assert cur.last_message_id == new["message"]


class _SlowStore(FileStore):
    """The file store, taking its time over each file put back (a large export's photos)."""

    async def put_file(self, kind: str, key: str, source: Path) -> StoredInfo:
        await asyncio.sleep(1.5)
        return await super().put_file(kind, key, source)


@pytest.mark.postgres
async def test_on_postgres_an_import_whose_files_take_long_is_not_ended_half_way(
    app_factory: AppFactory, migrated_postgres_url: str, tmp_path: Path
) -> None:
    """An import writes its rows, then puts the files back before one commit; meanwhile its
    transaction waits. PostgreSQL ends a transaction of ours that waits too long (a frozen
    process's, so that it gives its rows up): a large export's files must not count as that."""
    app = await app_factory(database_url_setting=migrated_postgres_url)
    ana = await add_user(app, "ana")
    assert ana.id is not None
    for n in (1, 2):
        await app.files.put("photos", f"{ana.id}/{n}-0.jpg", os.urandom(20_000))
    target = tmp_path / "ana.zip"
    await without_hooks(app).export(ana.id, target)
    await app.userdata.delete(ana.id)

    impatient = Database(migrated_postgres_url, frozen_limit=1.0)
    try:
        files = _SlowStore.open(impatient, app.settings.data_dir, REGISTRY.file_kinds())
        userdata = UserData(
            db=impatient,
            files=files,
            tables=app.userdata.tables,
            clock=app.clock,
            spool_dir=app.userdata.spool_dir,
            work_dir=app.userdata.work_dir,
            references=REFS,
        )
        moved = await userdata.import_(target)
    finally:
        await impatient.dispose()
    assert moved.files == {"photos": 2}
    assert len(await app.files.listing("photos")) == 2
