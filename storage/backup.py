"""Backups of a whole lifebot, and restoring one into an empty data folder and database.

A backup is a folder (0700, every file 0600) named ``lifebot-backup-<time>``:

- ``manifest.json``: what it holds (format, the database's kind and schema revision, row
  counts, files by kind, sizes);
- the database: SQLite's own online backup (``lifebot.db``, a consistent copy even while
  ``serve`` writes), or on PostgreSQL a logical dump, ``database/<table>.jsonl``: every
  modelled table read in one REPEATABLE READ, read-only transaction (one snapshot, so the
  copy is consistent across tables), each row through the one typed encoder;
- ``files/<kind>/<key>``: every stored file of every kind that is not derived, read through
  the file store (so from the database on PostgreSQL, from the folder on SQLite);
- ``spool/``: this host's live pendant audio not yet transcribed;
- the persona file and the web page's signing key, when they exist.

It is built under ``<name>.partial`` and renamed when complete: a folder without that suffix
is a whole backup.

Why our own dump on PostgreSQL rather than ``pg_dump``: the restore then goes through our
own migrations (the schema is created by Alembic at the backup's revision, the rows are
inserted, then Alembic brings it to this version), so it needs no client binaries of the
server's major version (``pg_dump`` refuses a newer server), no superuser, and the same
encoder as the export, covered by the same contract tests. Its cost is speed on very large
databases; ``pg_dump`` stays available to operators who want it (the README says how).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import MetaData, Table, insert, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import SQLModel

import storage.models  # noqa: F401  # registers every table in the metadata
from storage.codec import dumps
from storage.db import Database, migration_chain
from storage.files import FileStore
from storage.files.private import FILE_MODE, private_dir, sync_dir, write_private
from storage.repos.userdata import bump_sequences, columns_of, decode_rows, encode_row

FORMAT = "lifebot-backup"
VERSION = 1
STORE_TABLES = frozenset({"storedfile", "storedfilechunk"})
"""The file store's own tables: their files are copied as files (``files/``)."""
BATCH = 500
"""Rows written or inserted at a time."""


class BackupError(Exception):
    """A backup or restore that cannot be done; the message says why in plain words."""


@dataclass(slots=True)
class Backup:
    """Where a backup went and what it holds."""

    folder: Path
    database: Path
    """``lifebot.db`` (SQLite) or the ``database`` folder of the logical dump."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows by table (the logical dump); empty for SQLite's page copy."""
    files: dict[str, int] = field(default_factory=dict)
    """Stored files by kind."""
    audio_files: int = 0
    """Live spool files."""
    bytes: int = 0
    """Size of everything copied."""
    seconds: float = 0.0


def data_tables() -> list[Table]:
    """Every modelled table but the file store's, parents before children."""
    return [t for t in SQLModel.metadata.sorted_tables if t.name not in STORE_TABLES]


async def backup(
    *,
    db: Database,
    files: FileStore,
    target_root: Path,
    now: datetime,
    spool_dir: Path,
    extras: Mapping[str, Path] | None = None,
) -> Backup:
    """Make a backup folder under ``target_root`` (see the module docstring)."""
    started = time.monotonic()
    name = f"lifebot-backup-{now:%Y%m%d-%H%M%S}"
    final = target_root / name
    if final.exists():
        raise BackupError(f"{final} exists already; wait a second or choose another --to")
    folder = target_root / f"{name}.partial"
    await asyncio.to_thread(private_dir, target_root)
    await asyncio.to_thread(shutil.rmtree, folder, True)
    await asyncio.to_thread(private_dir, folder)
    try:
        if db.is_sqlite:
            await asyncio.to_thread(_copy_sqlite, db.path, folder / "lifebot.db")
            done = Backup(final, final / "lifebot.db")
            revision = await db.current_revision()
        else:
            rows, revision = await _dump_postgres(db, folder / "database")
            done = Backup(final, final / "database", rows=rows)
        for kind in files.kinds():
            if kind.derived:
                continue
            for info in await files.listing(kind.name):
                await files.copy_to(kind.name, info.key, folder / "files" / kind.name / info.key)
                done.files[kind.name] = done.files.get(kind.name, 0) + 1
        done.audio_files = await asyncio.to_thread(_copy_spool, spool_dir, folder / "spool")
        kept = []
        for name, extra in (extras or {}).items():
            if await asyncio.to_thread(extra.is_file):
                await asyncio.to_thread(_copy_private, extra, folder / name)
                kept.append(name)
        done.bytes = await asyncio.to_thread(_size, folder)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "created_at": now.isoformat(),
            "database": "sqlite" if db.is_sqlite else "postgresql",
            "revision": revision,
            "tables": done.rows,
            "columns": columns_of(data_tables()) if not db.is_sqlite else {},
            "files": done.files,
            "spool": done.audio_files,
            "extras": kept,
            "bytes": done.bytes,
        }
        await asyncio.to_thread(
            write_private, folder / "manifest.json", dumps(manifest, indent=2).encode()
        )
        await asyncio.to_thread(os.replace, folder, final)
        await asyncio.to_thread(sync_dir, target_root)
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, folder, True)
        raise
    done.seconds = time.monotonic() - started
    return done


def _copy_sqlite(db_file: Path | None, dest: Path) -> None:
    """SQLite's online backup: page by page, a consistent snapshot even while serve writes."""
    if db_file is None:
        raise BackupError("an in-memory database cannot be backed up")
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    os.close(fd)  # made 0600 before SQLite writes a byte of it
    src = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)
        finally:
            out.close()
    finally:
        src.close()
    dest.chmod(FILE_MODE)


async def _dump_postgres(db: Database, folder: Path) -> tuple[dict[str, int], str | None]:
    """Every modelled table as JSON lines, from one read-only snapshot."""
    await asyncio.to_thread(private_dir, folder)
    counts: dict[str, int] = {}
    async with db.engine.connect() as raw:
        conn = await raw.execution_options(
            isolation_level="REPEATABLE READ", postgresql_readonly=True
        )
        async with conn.begin():
            revision = (
                await conn.execute(text("SELECT version_num FROM alembic_version"))
            ).scalar()
            for table in data_tables():
                counts[table.name] = await _dump_table(conn, table, folder)
    return counts, revision


async def _dump_table(conn: AsyncConnection, table: Table, folder: Path) -> int:
    out = await asyncio.to_thread(_create, folder / f"{table.name}.jsonl")
    count = 0
    try:
        q = select(table)
        pk = list(table.primary_key.columns)
        if pk:
            q = q.order_by(*pk)
        stream = await conn.stream(q.execution_options(yield_per=BATCH))
        lines: list[str] = []
        async for row in stream:
            lines.append(dumps(encode_row(row)))
            count += 1
            if len(lines) >= BATCH:
                await asyncio.to_thread(out.write, ("\n".join(lines) + "\n").encode())
                lines = []
        if lines:
            await asyncio.to_thread(out.write, ("\n".join(lines) + "\n").encode())
        await asyncio.to_thread(os.fsync, out.fileno())
    finally:
        await asyncio.to_thread(out.close)
    return count


def _create(path: Path) -> BinaryIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    return os.fdopen(fd, "wb")


def _copy_private(source: Path, target: Path) -> None:
    private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        shutil.copyfileobj(src, out, 1024 * 1024)


def _copy_spool(spool: Path, target: Path) -> int:
    if not spool.is_dir():
        return 0
    count = 0
    for path in sorted(spool.iterdir()):
        if path.is_file() and path.suffix == ".pcm":
            _copy_private(path, target / path.name)
            count += 1
    return count


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# --- restore ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Restored:
    """What a restore brought back."""

    rows: dict[str, int] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    audio_files: int = 0
    extras: list[str] = field(default_factory=list)
    seconds: float = 0.0


def read_manifest(folder: Path) -> dict[str, Any]:
    """A backup folder's manifest; BackupError when the folder is not a whole backup."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(
            f"{folder} is not a lifebot backup (no readable manifest.json): {exc}"
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{folder} is not a lifebot backup")
    if int(manifest.get("version", 0)) > VERSION:
        raise BackupError(f"{folder} comes from a newer lifebot; upgrade first")
    revision = manifest.get("revision")
    if revision is not None and revision not in migration_chain():
        raise BackupError(
            f"{folder} holds schema revision {revision!r}, which this lifebot does not know: "
            "a newer lifebot made it; upgrade first"
        )
    return manifest


async def database_is_empty(db: Database) -> bool:
    """True when no modelled table holds a row (or there are no tables yet)."""
    if db.is_sqlite and (db.path is None or not db.path.exists()):
        return True
    async with db.engine.connect() as conn:
        existing = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        for table in SQLModel.metadata.sorted_tables:
            if table.name not in existing:
                continue
            if (await conn.execute(select(text("1")).select_from(table).limit(1))).first():
                return False
    return True


async def folder_is_empty(files: FileStore, spool_dir: Path) -> bool:
    """True when this host's folder holds no lasting stored file and the spool no audio.

    (On PostgreSQL the store's files are in the database: ``database_is_empty`` covers them.)
    """
    if files.shared is None:
        for kind in files.kinds():
            if kind.derived:
                continue
            found = await asyncio.to_thread(files.local.listing, kind.name, "")
            if found:
                return False
    return not await asyncio.to_thread(_has_audio, spool_dir)


def _has_audio(spool_dir: Path) -> bool:
    return spool_dir.is_dir() and any(spool_dir.glob("*.pcm"))


async def restore_database(db: Database, folder: Path, manifest: dict[str, Any]) -> dict[str, int]:
    """Put a backup's database into the empty database ``db`` (then migrate to this version).

    SQLite: the copy becomes the database file (``db`` must not be open yet). PostgreSQL:
    the schema is made at the backup's revision, the rows inserted, the sequences moved on.
    """
    kind = manifest.get("database")
    if kind == "sqlite":
        if not db.is_sqlite or db.path is None:
            raise BackupError(
                "this backup holds a SQLite database; restore it with a SQLite "
                "LIFEBOT_DATABASE_URL (the default), then move to PostgreSQL if you wish"
            )
        await db.dispose()
        await asyncio.to_thread(_put_sqlite, folder / "lifebot.db", db.path)
        await db.migrate()
        return {}
    if kind != "postgresql" or db.is_sqlite:
        raise BackupError(
            "this backup holds a PostgreSQL dump; restore it with LIFEBOT_DATABASE_URL "
            "naming an empty PostgreSQL database"
        )
    revision = manifest.get("revision")
    current = await db.current_revision()
    if current is None and revision:
        await db.migrate(str(revision))
    elif current != revision:
        raise BackupError(
            f"the database is at schema revision {current!r} and the backup at {revision!r}: "
            "restore into a newly created, empty database (createdb)"
        )
    counts: dict[str, int] = {}
    columns = manifest.get("columns") or {}
    async with db.engine.begin() as conn:
        # The tables as they are at the backup's revision (this lifebot may be newer).
        tables = await conn.run_sync(_reflected)
        for table in tables:
            kinds = columns.get(table.name)
            counts[table.name] = await _load_table(conn, table, folder / "database", kinds)
        await bump_sequences(conn, tables)
    await db.migrate()
    return {k: v for k, v in counts.items() if v}


def _reflected(conn: Connection) -> list[Table]:
    meta = MetaData()
    meta.reflect(conn)
    skip = STORE_TABLES | {"alembic_version"}
    return [t for t in meta.sorted_tables if t.name not in skip]


def _put_sqlite(source: Path, target: Path) -> None:
    if not source.is_file():
        raise BackupError(f"{source} is missing: the backup is incomplete")
    for suffix in ("", "-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    os.close(fd)
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(target)
        try:
            src.backup(out)
        finally:
            out.close()
    finally:
        src.close()
    target.chmod(FILE_MODE)


async def _load_table(
    conn: AsyncConnection, table: Table, folder: Path, kinds: dict[str, str] | None
) -> int:
    path = folder / f"{table.name}.jsonl"
    if not await asyncio.to_thread(path.exists):
        return 0
    src = await asyncio.to_thread(path.open, "r", encoding="utf-8")
    count = 0
    try:
        while True:
            lines = await asyncio.to_thread(_read_lines, src, BATCH)
            if not lines:
                break
            rows = [json.loads(line) for line in lines if line.strip()]
            if rows:
                await conn.execute(insert(table), decode_rows(table, rows, kinds))
                count += len(rows)
    finally:
        await asyncio.to_thread(src.close)
    return count


def _read_lines(src: Any, n: int) -> list[str]:
    out = []
    for _ in range(n):
        line = src.readline()
        if not line:
            break
        out.append(line)
    return out


async def restore_files(
    files: FileStore, folder: Path, spool_dir: Path
) -> tuple[dict[str, int], int]:
    """Put a backup's stored files back through the store, and its spool into the spool."""
    counts: dict[str, int] = {}
    root = folder / "files"
    for kind in files.kinds():
        if kind.derived:
            continue
        base = root / kind.name
        paths = await asyncio.to_thread(_files_under, base)
        for path in paths:
            key = path.relative_to(base).as_posix()
            await files.put_file(kind.name, key, path)
            counts[kind.name] = counts.get(kind.name, 0) + 1
    audio = await asyncio.to_thread(_copy_spool, folder / "spool", spool_dir)
    if audio:
        await asyncio.to_thread(private_dir, spool_dir)
    return counts, audio


def _files_under(base: Path) -> list[Path]:
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*") if p.is_file() and not p.name.startswith("."))


def restore_extra(folder: Path, name: str, target: Path) -> bool:
    """Copy one extra file (persona, signing key) back unless ``target`` exists (blocking)."""
    source = folder / name
    if not source.is_file() or target.exists():
        return False
    _copy_private(source, target)
    return True
