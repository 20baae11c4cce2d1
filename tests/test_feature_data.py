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
import resource
import signal
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from bot.app.build import App, build_app, start_app
from bot.app.features import REGISTRY
from bot.app.logs import setup_logging
from bot.device.spool import Spool
from bot.messages import Attachment
from storage.files import BadKey, UndeclaredKind
from storage.models import StoredFile
from storage.portable import ExportFileError, UserData
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user, make_settings
from tests.support.builders import make_inbound
from tests.support.cli import lifebot_script, run_cli, run_lifebot
from tests.support.device import add_device
from tests.support.documents import pdf
from tests.support.omi import post_chunk
from tests.support.rows import fill, rows_of
from tests.support.web import client_for, sign_in

TABLES = set(REGISTRY.user_tables())
LEASE = pdf("Tenancy agreement", "The rent is 950 EUR a month")


def key_of(kind_name: str, user_id: int) -> str:
    """A key of a declared kind for ``user_id`` (per-user kinds start with the owner's id)."""
    kind = REGISTRY.file_kind(kind_name)
    return f"{user_id}/gen-{kind_name}.bin" if kind.per_user else f"{user_id}/gen.chunk"


def content(kind: str, user_id: int) -> bytes:
    """Distinct bytes for each kind and user (all 256 byte values in them)."""
    return f"{kind}:{user_id}:".encode() + bytes(range(256))


async def put_every_kind(app: App, user_id: int) -> None:
    """One file of every declared kind for ``user_id``."""
    for kind in REGISTRY.file_kinds():
        await app.files.put(kind.name, key_of(kind.name, user_id), content(kind.name, user_id))


@pytest.fixture
async def db_app(app_factory: AppFactory, postgres_or_sqlite_url: str) -> App:
    """A started app on an empty SQLite or PostgreSQL database (no model: nothing to ask)."""
    return await app_factory(database_url_setting=postgres_or_sqlite_url)


async def test_every_user_table_and_file_kind_round_trips_and_is_deleted(
    db_app: App, tmp_path: Path
) -> None:
    app = db_app
    ana = await add_user(app, "ana")
    bob = await add_user(app, "bob")
    assert ana.id is not None and bob.id is not None
    async with app.db.engine.begin() as conn:
        await fill(conn, TABLES, ana.id, salt=1)
        await fill(conn, TABLES, bob.id, salt=2)
    async with app.db.engine.connect() as conn:
        before_rows = await rows_of(conn, TABLES, ana.id)
        bobs = await rows_of(conn, TABLES, bob.id)
    assert all(before_rows.values()), "a generated row in every table"
    await put_every_kind(app, ana.id)
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
    assert {f"files/{k}/{key_of(k, ana.id)}" for k in exported} == set(files)
    assert all(files[f"files/{k}/{key_of(k, ana.id)}"] == content(k, ana.id) for k in exported)
    assert done.files == dict.fromkeys(exported, 1)
    assert f":{bob.id}:".encode() not in b"".join(files.values())

    # --- delete: every row and every per-user file of Ana's, caches included; Bob's stay ---
    gone = await app.userdata.delete(ana.id)
    assert gone.rows["user"] == 1
    async with app.db.engine.connect() as conn:
        assert all(not rows for rows in (await rows_of(conn, TABLES, ana.id)).values())
        assert await rows_of(conn, TABLES, bob.id) == bobs
    for kind in REGISTRY.file_kinds():
        left = await app.files.stat(kind.name, key_of(kind.name, ana.id))
        assert (left is None) == kind.per_user, kind.name
        assert await app.files.stat(kind.name, key_of(kind.name, bob.id)) is not None

    # --- import: the same rows, value for value, and the lasting files ---------------------
    # (Without memory's after-import pass, which re-embeds vectors of another model.)
    plain = UserData(
        db=app.db,
        files=app.files,
        tables=app.userdata.tables,
        clock=app.clock,
        spool_dir=app.userdata.spool_dir,
        work_dir=app.userdata.work_dir,
    )
    back = await plain.import_(target)
    assert back.user_id == ana.id
    async with app.db.engine.connect() as conn:
        assert await rows_of(conn, TABLES, ana.id) == before_rows
    for name in exported:
        assert await app.files.get(name, key_of(name, ana.id)) == content(name, ana.id)
    with pytest.raises(ExportFileError, match="already has a user"):
        await app.userdata.import_(target)


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
