"""A user's data out and back in, and gone: one export, import and delete for every feature.

The composition root hands in what the registered features declare: their user tables and
their kinds of stored file. So the web page's download, the API's, ``lifebot export`` and
``lifebot users delete`` all walk the same list, and a new feature's table or file kind is in
every one of them the day it is registered.

The export is a zip:

- ``manifest.json``: format, version, the user, row counts, each column's kind (how its
  values are written, ``storage.codec``) and file counts by kind;
- ``<table>.json`` for the user row and every declared table (the user's rows only);
- ``files/<kind>/<key>`` for every stored file of theirs of every kind that is not derived
  (caches are rebuilt, never exported);
- ``audio/<session>.pcm``: their pendant sessions' audio still in this host's live spool.

It is written under a temporary name (0600) and renamed into place when complete: a failure
half way leaves no zip that looks whole. Import takes the same zip (and format 1 zips) into any
database, files included: every row gets a new id and every reference to one is rewritten
(``storage.remap``), the user's files get keys with the new ids, and every key is checked to
be the user's own. It is all or nothing: one transaction, and the files it put are deleted
again when anything fails before it commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from sqlalchemy import select
from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    StatementError,
)

from bot.clock import Clock
from bot.feature import ImportFix, Reference
from storage.codec import dumps
from storage.db import Database
from storage.files import FileStore
from storage.files.base import BadKey, check_key
from storage.files.private import FILE_MODE, private_dir
from storage.models import User
from storage.remap import IdMap, Remapper
from storage.repos._conn import unbounded_idle
from storage.repos.userdata import USER, ImportConflict, UserDataRepo, columns_of, user_tables

FORMAT = "lifebot-user-export"
VERSION = 2
"""2: ``files/<kind>/<key>`` and each column's kind in the manifest (1: ``images/``,
``documents/`` and tagged values; still imported)."""

_SESSION_FILE = re.compile(r"^[A-Za-z0-9_-]{1,64}\.pcm$")
_LEGACY_FOLDERS = {"images": "photos", "documents": "documents"}
"""Format 1's folders of a user's files and the kinds they are now."""

UserHook = Callable[[int], Awaitable[object]]


class ExportFileError(Exception):
    """Not a lifebot export, a damaged one, or one that cannot go into this database.

    (It cannot when it would merge two people: ImportConflict.) The message says which.
    """


@dataclass(slots=True)
class Moved:
    """What an export, import or delete moved."""

    user_id: int
    name: str
    rows: dict[str, int]
    """Rows by table (the user row under ``user``)."""
    files: dict[str, int] = field(default_factory=dict)
    """Stored files by kind."""
    audio_files: int = 0
    """Live spool files of pendant sessions."""
    old_user_id: int | None = None
    """An import: the user's id in the export (``user_id`` is their new id here)."""


class UserData:
    """Export, import and delete over every declared table and kind of file."""

    def __init__(
        self,
        *,
        db: Database,
        files: FileStore,
        tables: Sequence[str],
        clock: Clock,
        spool_dir: Path,
        work_dir: Path,
        after_import: Sequence[UserHook] = (),
        after_delete: Sequence[UserHook] = (),
        references: Sequence[Reference] = (),
        import_fixes: Sequence[ImportFix] = (),
    ) -> None:
        self.db = db
        self.files = files
        self.tables = tuple(tables)
        """Every declared user table (the registry's)."""
        self.clock = clock
        self.spool_dir = spool_dir
        """This host's live pendant spool (``<session>.pcm``)."""
        self.work_dir = work_dir
        """A private folder for temporary files (web downloads are written here first)."""
        self.import_fixes = tuple(import_fixes)
        """The features' fixes for an older export's rows (the registry's), run first."""
        self.after_import = tuple(after_import)
        """Called with the user id once an import is in (memory indexes what came without
        vectors)."""
        self.after_delete = tuple(after_delete)
        """Called with the user id once they are gone (memory forgets its in-memory copy)."""
        self.references = tuple(references)
        """Every declared soft reference (the registry's): rewritten by an import."""
        user_tables(self.tables)  # fail at start-up, not at the first export

    def exported_kinds(self) -> list[str]:
        """Kinds of stored file an export and a delete carry: every per-user, lasting kind."""
        return [k.name for k in self.files.kinds() if k.per_user and not k.derived]

    # --- export ------------------------------------------------------------------------------

    async def export(self, user_id: int, target: Path) -> Moved:
        """Write the user's zip to ``target`` (0600; nothing at ``target`` unless complete)."""
        async with self.db.session() as s:
            repo = UserDataRepo(s, self.tables)
            data = await repo.dump(user_id)
            columns = columns_of([repo.user_table, *repo.tables])
        if not data.get(USER):
            raise LookupError(f"there is no user {user_id}")
        name = str(data[USER][0].get("display_name") or user_id)
        stored = {k: await self.files.user_files(k, user_id) for k in self.exported_kinds()}
        sessions = [str(r["id"]) for r in data.get("devicesession", [])]
        audio = await asyncio.to_thread(self._spooled, sessions)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "user_id": user_id,
            "name": name,
            "exported_at": self.clock.now().isoformat(),
            "tables": {k: len(v) for k, v in data.items()},
            "columns": columns,
            "files": {k: len(v) for k, v in stored.items() if v},
            "audio": len(audio),
        }
        await asyncio.to_thread(_parent_folder, target)
        part = target.with_name(f".{target.name}.{os.getpid()}.part")
        out = await asyncio.to_thread(_create_private, part)
        zf = zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED)
        try:
            await asyncio.to_thread(zf.writestr, "manifest.json", dumps(manifest, indent=2))
            for table, rows in data.items():
                await asyncio.to_thread(zf.writestr, f"{table}.json", dumps(rows, indent=1))
            await self._add_files(zf, stored)
            for session_file in audio:
                await asyncio.to_thread(
                    zf.write, session_file, f"audio/{session_file.name}", zipfile.ZIP_STORED
                )
            await asyncio.to_thread(zf.close)
            await asyncio.to_thread(_finish, out, part, target)
        except BaseException:
            await asyncio.to_thread(_abandon, zf, out, part)
            raise
        return Moved(
            user_id,
            name,
            {k: len(v) for k, v in data.items()},
            {k: len(v) for k, v in stored.items() if v},
            len(audio),
        )

    async def export_temporary(self, user_id: int) -> Path:
        """Export into a new private temporary file (the caller deletes it when sent)."""
        await asyncio.to_thread(private_dir, self.work_dir)
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, "", "export-", self.work_dir))
        target = folder / "lifebot-export.zip"
        try:
            await self.export(user_id, target)
        except BaseException:
            await asyncio.to_thread(shutil.rmtree, folder, True)
            raise
        return target

    async def _add_files(self, zf: zipfile.ZipFile, stored: dict[str, list[Any]]) -> None:
        if not any(stored.values()):
            return
        await asyncio.to_thread(private_dir, self.work_dir)
        with tempfile.TemporaryDirectory(prefix="files-", dir=self.work_dir) as tmp:
            copy = Path(tmp) / "file"
            for kind, infos in stored.items():
                for info in infos:
                    # Pictures and PDFs are compressed already: stored as they are, quickly.
                    await self.files.copy_to(kind, info.key, copy)
                    arc = f"files/{kind}/{info.key}"
                    await asyncio.to_thread(zf.write, copy, arc, zipfile.ZIP_STORED)

    def _spooled(self, sessions: list[str]) -> list[Path]:
        out = []
        for sid in sessions:
            path = self.spool_dir / f"{sid}.pcm"
            if _SESSION_FILE.match(path.name) and path.is_file():
                out.append(path)
        return out

    # --- import ------------------------------------------------------------------------------

    async def import_(self, path: Path, *, name: str | None = None) -> Moved:
        """Load an export as a new user (files included): every row gets a new id.

        ``name``: the user's name here instead of the exported one. ExportFileError if it is
        not an export, or (ImportConflict) if it would merge two people; then nothing of it is
        in the database and none of its files are stored.
        """
        manifest, data, members = await asyncio.to_thread(read_export, path)
        users = data.get(USER) or []
        if len(users) != 1 or users[0].get("id") is None:
            raise ExportFileError(f"{path}: the export holds no user")
        if not _is_id(users[0]["id"]):
            raise ExportFileError(f"{path}: user.json: the user's id is not a number")
        old_user = int(users[0]["id"])
        for fix in self.import_fixes:  # rows an older version wrote that are refused now
            fix(data)
        kinds = {k.name for k in self.files.kinds() if k.per_user and not k.derived}
        sessions = {str(r.get("id")) for r in data.get("devicesession", [])}
        for member in members:  # every file hers and safe, before anything is written
            _place(member, old_user, kinds, sessions)
        put: list[tuple[str, str]] = []
        """Files stored so far (kind, key; ``audio`` for the spool): taken back on failure."""
        user_id, saving = 0, False
        try:
            async with self.db.session() as s:
                await unbounded_idle(s)  # it waits on the files below, however many
                try:
                    user_id, ids = await UserDataRepo(s, self.tables).load_new(
                        data, self.references, name=name
                    )
                except ImportConflict as exc:
                    raise ExportFileError(str(exc)) from exc
                except ValueError as exc:
                    raise ExportFileError(f"{path}: {exc}; nothing was imported") from exc
                # Files go in before the commit: a file that fails rolls the rows back too.
                files, audio = await self._restore_files(path, members, data, ids, put)
                saving = True  # what fails from here on is the commit itself
        except IntegrityError as exc:
            await self._take_back(put)
            raise ExportFileError(
                "the import clashed with rows written meanwhile (or a value this database "
                f"already has); nothing was imported: {exc.orig}"
            ) from exc
        except (StatementError, OverflowError) as exc:
            refused = await self._refusal(path, exc, put, user_id if saving else None)
            if refused is not None:
                raise refused from exc
        except BaseException:
            await self._take_back(put)
            raise
        for hook in self.after_import:
            await hook(user_id)
        shown = name.strip() if name and name.strip() else manifest.get("name", user_id)
        return Moved(
            user_id,
            str(shown),
            {k: len(v) for k, v in data.items()},
            files,
            audio,
            old_user_id=old_user,
        )

    async def _refusal(
        self,
        path: Path,
        exc: StatementError | OverflowError,
        put: list[tuple[str, str]],
        saved_as: int | None,
    ) -> ExportFileError | None:
        """What to tell of an import a statement failed; None when it was saved all the same.

        ``saved_as``: the new user's id when the commit itself failed. A connection lost then
        may have lost only the answer: a new connection asks whether the user is there.
        """
        why = exc.orig if isinstance(exc, StatementError) and exc.orig else exc
        said = str(why).splitlines()[0][:300] if str(why) else type(why).__name__
        if not _connection_lost(exc):
            # A value of the wrong type or size for its column (a hand-edited export).
            await self._take_back(put)
            return ExportFileError(
                f"{path}: a value does not fit its column in this database; nothing was "
                f"imported: {said}"
            )
        landed = await self._user_stored(saved_as) if saved_as is not None else False
        if landed is None:  # its files stay: they may be the saved import's
            return ExportFileError(
                f"the database could not be reached while the import was being saved ({said}); "
                "it may or may not have been saved: look for the person (lifebot users) when "
                "the database is back, before importing again"
            )
        if landed:
            return None
        await self._take_back(put)
        return ExportFileError(
            f"the database could not be reached or stopped answering during the import "
            f"({said}); the import was not applied: nothing was imported and nothing was "
            "changed. Try again when the database is back"
        )

    async def _user_stored(self, user_id: int) -> bool | None:
        """Whether user ``user_id`` is in the database (None: it cannot be asked either)."""
        try:
            async with self.db.session() as s:
                found = await s.get(User, user_id)
        except Exception:  # noqa: BLE001  (still unreachable: the answer is "not known")
            return None
        return found is not None

    async def _take_back(self, put: list[tuple[str, str]]) -> None:
        """Delete the files an import stored before it failed (best effort, each one)."""
        for kind, key in reversed(put):
            with contextlib.suppress(Exception):
                if kind == "audio":
                    await asyncio.to_thread((self.spool_dir / key).unlink, True)
                else:
                    await self.files.delete(kind, key)

    async def _restore_files(
        self,
        path: Path,
        members: list[str],
        data: dict[str, list[dict[str, Any]]],
        ids: IdMap,
        put: list[tuple[str, str]],
    ) -> tuple[dict[str, int], int]:
        """Put the zip's files back under their new keys (each one put is added to ``put``).

        Stored kinds go into the store, live audio into the spool.
        """
        old_user = int(data[USER][0]["id"])
        sessions = {str(r["id"]) for r in data.get("devicesession", [])}
        kinds = {k.name: k for k in self.files.kinds() if k.per_user and not k.derived}
        remap = Remapper(ids, ())
        counts: dict[str, int] = {}
        audio = 0
        await asyncio.to_thread(private_dir, self.work_dir)
        with tempfile.TemporaryDirectory(prefix="import-", dir=self.work_dir) as tmp:
            copy = Path(tmp) / "file"
            for member in members:
                place = _place(member, old_user, set(kinds), sessions)
                if place is None:
                    continue
                kind, key = place
                if kind != "audio":
                    # A key of the kind's declared shape has its ids new; any other (an older
                    # version's) at least its owner's. _place checked it starts with the id.
                    key = remap.file_key(kinds[kind].key_ids or "{user}/", key) or str(
                        remap.file_key("{user}/", key)
                    )
                try:
                    await asyncio.to_thread(_extract, path, member, copy)
                except (zipfile.BadZipFile, OSError) as exc:
                    raise ExportFileError(f"{path}: {member} could not be put back: {exc}") from exc
                if kind == "audio":
                    target = self.spool_dir / key
                    await asyncio.to_thread(private_dir, self.spool_dir)
                    if await asyncio.to_thread(target.exists):
                        raise ExportFileError(f"this host's spool already has {key}")
                    put.append(("audio", key))
                    await asyncio.to_thread(_move_private, copy, target)
                    audio += 1
                else:
                    put.append((kind, key))
                    await self.files.put_file(kind, key, copy)
                    counts[kind] = counts.get(kind, 0) + 1
        return counts, audio

    # --- delete ------------------------------------------------------------------------------

    async def delete(self, user_id: int) -> Moved:
        """Delete every row and every file of the user (caches too); what went."""
        async with self.db.session() as s:
            repo = UserDataRepo(s, self.tables)
            conn = await s.connection()
            users = (
                await conn.execute(
                    select(repo.user_table.c.display_name).where(repo.user_table.c.id == user_id)
                )
            ).all()
            sessions = await _session_ids(repo, user_id)
            counts = await repo.delete(user_id)
        files = await self.files.delete_user(user_id)
        audio = await asyncio.to_thread(self._remove_spooled, sessions)
        for hook in self.after_delete:
            await hook(user_id)
        name = str(users[0][0]) if users else str(user_id)
        return Moved(user_id, name, counts, files, audio)

    def _remove_spooled(self, sessions: list[str]) -> int:
        removed = 0
        for sid in sessions:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", sid):
                continue
            for path in self.spool_dir.glob(f"{sid}.*"):
                path.unlink(missing_ok=True)
                removed += 1
        return removed


async def _session_ids(repo: UserDataRepo, user_id: int) -> list[str]:
    table = next((t for t in repo.tables if t.name == "devicesession"), None)
    if table is None:
        return []
    conn = await repo.s.connection()
    rows = (await conn.execute(select(table.c.id).where(table.c.user_id == user_id))).all()
    return [str(r[0]) for r in rows]


def read_export(path: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], list[str]]:
    """The manifest, the tables and the member names of an export zip (blocking).

    ExportFileError when it is not one.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise ExportFileError(f"{path} is a zip but not a lifebot export")
            version = manifest.get("version", 0)  # format 1 zips may not say
            if not _is_id(version, zero=True):
                raise ExportFileError(f"{path}: its manifest's version is not a number")
            if version > VERSION:
                raise ExportFileError(f"{path} comes from a newer lifebot; upgrade first")
            names = zf.namelist()
            for info in zf.infolist():
                _refuse_a_bomb(path, info)
            tables = {
                name.removesuffix(".json"): json.loads(zf.read(name))
                for name in names
                if name.endswith(".json") and "/" not in name and name != "manifest.json"
            }
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        if isinstance(exc, ExportFileError):
            raise
        if isinstance(exc, zipfile.BadZipFile):
            raise ExportFileError(
                f"{path} is a damaged zip (cut short, or changed after it was written): "
                f"{exc}; nothing was imported. Export it again."
            ) from exc
        raise ExportFileError(f"{path} is not a lifebot export: {exc}") from exc
    for table, rows in tables.items():
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ExportFileError(f"{path}: {table}.json is not a list of rows")
    return manifest, tables, names


def _connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the database going away (or refusing to work), not a value of ours.

    A lost or refused connection is a DBAPIError too, so a StatementError does not tell it
    from a value that does not fit its column.
    """
    if not isinstance(exc, DBAPIError):
        return False
    return exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)


def _is_id(value: Any, *, zero: bool = False) -> bool:
    """A whole number as an export writes ids (not text, not true or false), above zero."""
    return type(value) is int and (value > 0 or (zero and value == 0))


def is_export(path: Path) -> bool:
    """True when ``path`` is a zip (``lifebot import`` then reads it as an export).

    A zip cut short (a broken download) has lost its directory at the end but still starts
    like one: it is an export too, and reading it says it is damaged.
    """
    if zipfile.is_zipfile(path):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _place(
    member: str, user_id: int, kinds: set[str], sessions: set[str]
) -> tuple[str, str] | None:
    """Where a zip member goes: (kind, key), ("audio", file name), or None to skip it.

    Never a path taken from the zip as it is: keys are checked, and a file must be the
    importing user's own (its key starts with their id); ExportFileError for one that is
    not (no export lifebot writes has one). A kind this lifebot does not keep is skipped.
    """
    path = PurePosixPath(member)
    parts = path.parts
    if path.is_absolute() or ".." in parts or "\\" in member:
        raise ExportFileError(
            f"{member} points outside the export; it is not one lifebot wrote. Nothing was "
            "imported."
        )
    if len(parts) == 2 and parts[0] == "audio":
        name = parts[1]
        if _SESSION_FILE.match(name) and name.removesuffix(".pcm") in sessions:
            return "audio", name
        return None
    if len(parts) == 2 and parts[0] in _LEGACY_FOLDERS:  # format 1
        kind, key = _LEGACY_FOLDERS[parts[0]], f"{user_id}/{parts[1]}"
    elif len(parts) >= 3 and parts[0] == "files":
        kind, key = parts[1], "/".join(parts[2:])
    else:
        return None
    if kind not in kinds:
        return None
    try:
        owner = check_key(key, per_user=True)
    except BadKey as exc:
        raise ExportFileError(f"{member}: {exc}. Nothing was imported.") from exc
    if owner != user_id:
        raise ExportFileError(
            f"{member} is a file of user {owner}, not of the exported user {user_id}. Nothing "
            "was imported."
        )
    return kind, key


_BOMB_SIZE = 8 * 1024 * 1024
_BOMB_RATIO = 200
"""A member over 8 MiB that unpacks to over 200 times its packed size is refused: lifebot's
own tables pack a few times smaller, photos and audio not at all; zeros pack 1,000 times."""


def _refuse_a_bomb(path: Path, info: zipfile.ZipInfo) -> None:
    if info.file_size > _BOMB_SIZE and info.file_size > _BOMB_RATIO * max(info.compress_size, 1):
        raise ExportFileError(
            f"{path}: {info.filename} unpacks to {info.file_size / 1e6:.0f} MB from "
            f"{info.compress_size / 1e3:.0f} kB, far more than any export lifebot writes; "
            "nothing was imported"
        )


def _create_private(path: Path) -> BinaryIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return os.fdopen(fd, "w+b")


def _finish(out: BinaryIO, part: Path, target: Path) -> None:
    out.flush()
    os.fsync(out.fileno())
    out.close()
    os.replace(part, target)


def _abandon(zf: zipfile.ZipFile, out: BinaryIO, part: Path) -> None:
    """Drop a zip that failed half way (its own close may fail the same way: ignored)."""
    with contextlib.suppress(Exception):
        zf.close()
    with contextlib.suppress(OSError):
        out.close()
    part.unlink(missing_ok=True)


def _extract(zip_path: Path, member: str, target: Path) -> None:
    with zipfile.ZipFile(zip_path) as zf, zf.open(member) as src:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 1024 * 1024)


def _move_private(source: Path, target: Path) -> None:
    shutil.move(source, target)
    target.chmod(FILE_MODE)


def _parent_folder(target: Path) -> None:
    """The folder an export goes to: made private when lifebot makes it."""
    if not target.parent.exists():
        private_dir(target.parent)
