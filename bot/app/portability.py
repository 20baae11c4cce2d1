"""A user's data out and back in (a zip of JSON files plus their audio), deletion, backups.

- ``export_user``: ``manifest.json``, one ``<table>.json`` per table and ``audio/<session>.pcm``
  for every pendant session of theirs still in the spool; ``images/`` and ``documents/``
  hold their photos and PDFs.
- ``import_user``: the same zip into a database that does not have that user; ids are kept.
- ``delete_user``: every row, every audio file, photo and document of one user.
- ``backup``: a consistent copy of a SQLite database (SQLite's online backup API, safe while
  ``serve`` writes) plus the audio spool and the persona file.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.app.build import App
from storage.repos.userdata import UserDataRepo

FORMAT = "lifebot-user-export"
VERSION = 1


class ExportFileError(Exception):
    """The file is not a lifebot export (or a damaged one); the message says which."""


@dataclass(slots=True)
class Exported:
    """What an export or import moved."""

    user_id: int
    name: str
    rows: dict[str, int]
    audio_files: int


def _spool(app: App) -> Path:
    return app.settings.data_dir / "spool"


def _files(app: App, user_id: int) -> list[tuple[Path, str]]:
    """The user's photo and document folders, with their folder name in an export zip."""
    return [
        (app.photos.store.root / str(user_id), "images"),
        (app.settings.data_dir / "documents" / str(user_id), "documents"),
    ]


def _session_ids(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [str(r["id"]) for r in data.get("devicesession", [])]


async def export_user(app: App, user_id: int, target: Path) -> Exported:
    """Write the zip; returns counts."""
    async with app.db.session() as s:
        data = await UserDataRepo(s).dump(user_id)
    name = str(data["user"][0]["display_name"]) if data.get("user") else str(user_id)
    spool = _spool(app)

    def write() -> int:
        audio = 0
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "user_id": user_id,
                "name": name,
                "exported_at": app.clock.now().isoformat(),
                "tables": {k: len(v) for k, v in data.items()},
            }
            zf.writestr("manifest.json", json.dumps(manifest, indent=2))
            for table, rows in data.items():
                zf.writestr(f"{table}.json", json.dumps(rows, ensure_ascii=False, indent=1))
            for sid in _session_ids(data):
                path = spool / f"{sid}.pcm"
                if path.exists():
                    zf.write(path, f"audio/{sid}.pcm")
                    audio += 1
            for folder, prefix in _files(app, user_id):
                if folder.is_dir():
                    for path in sorted(folder.iterdir()):
                        zf.write(path, f"{prefix}/{path.name}")  # files go with their messages
        return audio

    audio = await asyncio.to_thread(write)
    return Exported(user_id, name, {k: len(v) for k, v in data.items()}, audio)


def read_export(path: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The manifest and the tables of an export zip; ExportFileError if it is not one."""
    try:
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            if manifest.get("format") != FORMAT:
                raise ExportFileError(f"{path} is a zip but not a lifebot export")
            if int(manifest.get("version", 0)) > VERSION:
                raise ExportFileError(f"{path} comes from a newer lifebot; upgrade first")
            tables = {
                name.removesuffix(".json"): json.loads(zf.read(name))
                for name in zf.namelist()
                if name.endswith(".json") and name != "manifest.json"
            }
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as exc:
        raise ExportFileError(f"{path} is not a lifebot export: {exc}") from exc
    return manifest, tables


def is_export(path: Path) -> bool:
    """True when ``path`` is a zip made by ``lifebot export``."""
    return zipfile.is_zipfile(path)


async def import_user(app: App, path: Path) -> Exported:
    """Load an export into the app's database; the search index is rebuilt for the user."""
    manifest, data = await asyncio.to_thread(read_export, path)
    async with app.db.session() as s:
        try:
            user_id = await UserDataRepo(s).load(data)
        except ValueError as exc:
            raise ExportFileError(str(exc)) from exc
    spool = _spool(app)

    def restore_audio() -> int:
        count = 0
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                if name.startswith("audio/") and name.endswith(".pcm"):
                    spool.mkdir(parents=True, exist_ok=True)
                    target = spool / Path(name).name  # never a path from inside the zip
                    target.write_bytes(zf.read(name))
                    count += 1
                for folder, prefix in _files(app, user_id):
                    if name.startswith(f"{prefix}/") and name.count("/") == 1:
                        folder.mkdir(parents=True, exist_ok=True)
                        (folder / Path(name).name).write_bytes(zf.read(name))
        return count

    audio = await asyncio.to_thread(restore_audio)
    await app.memory.index_pending(user_id)  # embeds anything that came without a vector
    return Exported(
        user_id, str(manifest.get("name", user_id)), {k: len(v) for k, v in data.items()}, audio
    )


async def delete_user(app: App, user_id: int) -> Exported:
    """Delete every row, audio file and photo of the user."""
    async with app.db.session() as s:
        repo = UserDataRepo(s)
        data = await repo.dump(user_id)
        counts = await repo.delete(user_id)
    spool = _spool(app)

    def remove_audio() -> int:
        removed = 0
        for sid in _session_ids(data):
            for path in spool.glob(f"{sid}*"):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    audio = await asyncio.to_thread(remove_audio)
    for folder, _ in _files(app, user_id):
        await asyncio.to_thread(shutil.rmtree, folder, True)
    # The search term cache holds their words too.
    app.memory.index.corpora.forget(user_id)
    if app.memory.index.corpora.store is not None:
        await asyncio.to_thread(app.memory.index.corpora.store.drop, user_id)
    name = str(data["user"][0]["display_name"]) if data.get("user") else str(user_id)
    return Exported(user_id, name, counts, audio)


@dataclass(slots=True)
class Backup:
    """Where a backup went and what it holds."""

    folder: Path
    database: Path
    audio_files: int


def backup_sqlite(db_file: Path, data_dir: Path, target_root: Path, now: datetime) -> Backup:
    """Copy the database with SQLite's backup API, then the spool and persona (blocking)."""
    folder = target_root / f"lifebot-backup-{now:%Y%m%d-%H%M%S}"
    folder.mkdir(parents=True, exist_ok=False)
    dest = folder / "lifebot.db"
    src = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)  # page by page, a consistent snapshot even while serve writes
        finally:
            out.close()
    finally:
        src.close()
    audio = 0
    spool = data_dir / "spool"
    if spool.is_dir():
        for path in sorted(spool.iterdir()):
            if path.is_file():
                (folder / "spool").mkdir(exist_ok=True)
                shutil.copy2(path, folder / "spool" / path.name)
                audio += 1
    soul = data_dir / "SOUL.md"
    if soul.exists():
        shutil.copy2(soul, folder / "SOUL.md")
    return Backup(folder, dest, audio)
