"""`lifebot doctor --fix` (issue 31): it repairs what it can and prints every change it makes."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import sys
from pathlib import Path

import pytest

from storage.db import Database, migration_chain
from tests.support.cli import run_cli, run_lifebot


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(data: Path, **extra: str) -> dict[str, str]:
    return {"LIFEBOT_DATA_DIR": str(data), "LIFEBOT_WEB_PORT": str(_free_port()), **extra}


async def test_fix_creates_a_missing_data_folder_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    data = tmp_path / "var" / "lifebot"
    _, out, _ = await run_cli("doctor", cwd=tmp_path, env=_env(data))
    assert "the first start (or `doctor --fix`) creates it" in out
    assert not data.exists()  # without --fix, doctor changes nothing

    _, out, _ = await run_cli("doctor", "--fix", cwd=tmp_path, env=_env(data))
    assert f"fixed: created {data} (0700)" in out
    assert data.is_dir()
    assert _mode(data) == 0o700


async def test_fix_makes_every_folder_and_file_private_and_says_each_change(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    photos = data / "images" / "1"
    photos.mkdir(parents=True)
    picture = photos / "7-0.jpg"
    picture.write_bytes(b"\xff\xd8\xff")
    log = tmp_path / "logs" / "lifebot.log"
    log.parent.mkdir()
    log.write_text("a line\n")
    for path, mode in ((data, 0o755), (data / "images", 0o755), (photos, 0o775)):
        path.chmod(mode)
    picture.chmod(0o644)
    log.chmod(0o644)
    env = _env(data, LIFEBOT_LOG_FILE=str(log))

    _, out, _ = await run_cli("doctor", cwd=tmp_path, env=env)
    assert "file modes: PROBLEM - 5 folder(s) or file(s) others on this machine may read" in out
    assert "fix: `lifebot doctor --fix` makes folders 0700 and files 0600" in out

    _, out, _ = await run_cli("doctor", "--fix", cwd=tmp_path, env=env)
    assert f"fixed: {picture} was 0644, now 0600" in out
    assert f"fixed: {photos} was 0775, now 0700" in out
    assert f"fixed: {log} was 0644, now 0600" in out
    assert "file modes: ok" in out
    assert [_mode(p) for p in (data, data / "images", photos, picture, log)] == [
        0o700,
        0o700,
        0o700,
        0o600,
        0o600,
    ]


async def test_pending_migrations_are_applied_only_when_asked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    db_path = data / "lifebot.db"
    db = Database(f"sqlite+aiosqlite:///{db_path}")
    await db.migrate(migration_chain()[-2])  # one migration behind
    await db.dispose()
    db_path.chmod(0o600)

    _, out, _ = await run_cli("doctor", "--fix", cwd=tmp_path, env=_env(data))
    assert "not fixed: database changes the schema: add --migrate to apply it" in out
    assert "1 migration is pending" in out

    _, out, _ = await run_cli("doctor", "--fix", "--migrate", cwd=tmp_path, env=_env(data))
    assert f"fixed: applied 1 migration(s): {migration_chain()[-1]}" in out
    assert "database: ok" in out
    assert "(schema up to date)" in out


async def test_a_taken_port_is_named_with_the_process_holding_it(tmp_path: Path) -> None:
    port = _free_port()
    script = (
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
        "print('ready', flush=True); time.sleep(120)"
    )
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert (await holder.stdout.readline()).strip() == b"ready"
        env = {"LIFEBOT_DATA_DIR": str(tmp_path / "d"), "LIFEBOT_WEB_PORT": str(port)}
        code, out, _ = await run_cli("doctor", cwd=tmp_path, env=env)
    finally:
        holder.kill()
        await holder.communicate()
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("ports:"))
    assert f"web page port {port} is taken by pid {holder.pid}: {sys.executable} -c" in line
    assert "fix: stop that process or set LIFEBOT_WEB_PORT to a free port" in out


@pytest.mark.parametrize("fix", [False, True])
async def test_json_keeps_working_with_and_without_fix(tmp_path: Path, fix: bool) -> None:
    data = tmp_path / "d"
    args = ["doctor", "--json", *(["--fix"] if fix else [])]
    _, out, _ = await run_lifebot(*args, cwd=tmp_path, env=_env(data))
    report = json.loads(out)
    names = {c["name"] for c in report["checks"]}
    assert {"data dir", "file modes", "database", "ports"} <= names
    if fix:
        assert report["repairs"] == [f"fixed: created {data} (0700)"]
        assert data.is_dir()
    else:
        assert "repairs" not in report
        assert not data.exists()
