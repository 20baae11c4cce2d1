"""The one file store: every file a feature keeps, by declared kind and key.

A feature declares its kinds of file (``bot.feature.FileKind``); the composition root hands
the store every registered kind and the store refuses any other. Keys are relative names
(``12/345-0.jpg``); a per-user kind's keys start with the owner's user id, which is how
export and delete-my-data find a person's files.

Where the bytes live:

- kinds of lasting data (photos, documents, Omi's inbox, kept device audio) go to the
  *shared* backend: a folder (``<data dir>/files/<kind>/``) with SQLite, the database itself
  with PostgreSQL, so every ``serve`` process on every host reads what another stored;
- ``derived`` kinds (caches, files being transcribed) always stay in this host's folder:
  they are rebuilt or thrown away, and sharing them would only cost round trips.

Every method is a coroutine and never blocks the event loop: the folder backend runs in
worker threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from bot.feature import FileKind
from storage.db import Database
from storage.files.base import StoredInfo, UndeclaredKind, check_key
from storage.files.local import LocalBackend, local_folder
from storage.files.postgres import PostgresBackend


class FileStore:
    """Stored files of every declared kind (see the module docstring)."""

    def __init__(
        self,
        kinds: Iterable[FileKind],
        *,
        local: LocalBackend,
        shared: PostgresBackend | None = None,
    ) -> None:
        self._kinds = {k.name: k for k in kinds}
        self.local = local
        """This host's folder: every kind on SQLite, derived kinds always."""
        self.shared = shared
        """The database's backend (PostgreSQL), or None when the folder is the store."""

    @classmethod
    def open(cls, db: Database, data_dir: Path, kinds: Iterable[FileKind]) -> FileStore:
        """The store for a lifebot whose database is ``db`` and data folder ``data_dir``."""
        local = LocalBackend(local_folder(data_dir, ""))
        return cls(kinds, local=local, shared=None if db.is_sqlite else PostgresBackend(db))

    @property
    def where(self) -> str:
        """Where lasting files live, in words (``lifebot doctor``, backups)."""
        if self.shared is not None:
            return "the PostgreSQL database (shared by every process)"
        return f"{self.local.root} (this host's folder)"

    def kinds(self) -> tuple[FileKind, ...]:
        """Every kind the store keeps."""
        return tuple(self._kinds.values())

    def kind(self, name: str) -> FileKind:
        """The declared kind ``name``; UndeclaredKind for any other."""
        try:
            return self._kinds[name]
        except KeyError:
            raise UndeclaredKind(
                f"no registered feature declares the file kind {name!r}: add it to the "
                "feature's FileKinds (bot/feature.py) before storing such files"
            ) from None

    def is_shared(self, kind: str) -> bool:
        """True when files of ``kind`` are seen by every process (the database keeps them)."""
        return self.shared is not None and not self.kind(kind).derived

    def _owner(self, kind: str, key: str) -> int | None:
        return check_key(key, per_user=self.kind(kind).per_user)

    def _db(self, kind: str) -> PostgresBackend | None:
        return self.shared if self.is_shared(kind) else None

    # --- one file ---------------------------------------------------------------------------

    async def put(self, kind: str, key: str, data: bytes) -> StoredInfo:
        """Store ``data`` under ``key`` (atomically replacing any file there)."""
        owner = self._owner(kind, key)
        db = self._db(kind)
        if db is not None:
            return await db.put(kind, key, owner, data)
        return await asyncio.to_thread(self.local.put, kind, key, data)

    async def put_file(self, kind: str, key: str, source: Path) -> StoredInfo:
        """Store a copy of the local file ``source`` (read piece by piece)."""
        owner = self._owner(kind, key)
        db = self._db(kind)
        if db is not None:
            return await db.put(kind, key, owner, source)
        return await asyncio.to_thread(self.local.put, kind, key, source)

    async def get(self, kind: str, key: str) -> bytes:
        """A stored file's bytes (for files small enough to hold); MissingFile if none."""
        self._owner(kind, key)
        db = self._db(kind)
        if db is not None:
            return await db.get(kind, key)
        return await asyncio.to_thread(self.local.get, kind, key)

    async def copy_to(self, kind: str, key: str, target: Path) -> int:
        """Write a stored file to the local path ``target`` (0600); its size in bytes."""
        self._owner(kind, key)
        db = self._db(kind)
        if db is not None:
            return await db.copy_to(kind, key, target)
        return await asyncio.to_thread(self.local.copy_to, kind, key, target)

    async def stat(self, kind: str, key: str) -> StoredInfo | None:
        """Size and time of a stored file, or None when there is none."""
        self._owner(kind, key)
        db = self._db(kind)
        if db is not None:
            return await db.stat(kind, key)
        return await asyncio.to_thread(self.local.stat, kind, key)

    async def delete(self, kind: str, key: str) -> bool:
        """Remove a stored file; False when there was none."""
        self._owner(kind, key)
        db = self._db(kind)
        if db is not None:
            return await db.delete(kind, key)
        return await asyncio.to_thread(self.local.delete, kind, key)

    async def rename(self, kind: str, old: str, new: str) -> StoredInfo:
        """Give a stored file another key at once; MissingFile when there is none."""
        self._owner(kind, old)
        owner = self._owner(kind, new)
        db = self._db(kind)
        if db is not None:
            return await db.rename(kind, old, new, owner)
        return await asyncio.to_thread(self.local.rename, kind, old, new)

    # --- many files -------------------------------------------------------------------------

    async def listing(self, kind: str, prefix: str = "") -> list[StoredInfo]:
        """Every stored file of ``kind`` whose key starts with ``prefix``, sorted by key."""
        self.kind(kind)
        db = self._db(kind)
        if db is not None:
            return await db.listing(kind, prefix)
        return await asyncio.to_thread(self.local.listing, kind, prefix)

    async def total(self, kind: str) -> int:
        """Bytes of every stored file of ``kind``."""
        db = self._db(kind)
        if db is not None:
            return await db.total(kind)
        return sum(f.size for f in await self.listing(kind))

    async def user_files(self, kind: str, user_id: int) -> list[StoredInfo]:
        """One user's files of a per-user kind."""
        if not self.kind(kind).per_user:
            raise ValueError(f"{kind} files do not belong to a user")
        return await self.listing(kind, f"{int(user_id)}/")

    async def delete_user(self, user_id: int) -> dict[str, int]:
        """Delete every file of one user, of every per-user kind (caches too); counts by kind."""
        counts: dict[str, int] = {}
        for kind in self._kinds.values():
            if not kind.per_user:
                continue
            db = self._db(kind.name)
            if db is not None:
                n = await db.delete_owner(kind.name, int(user_id))
            else:
                n = await asyncio.to_thread(self.local.delete_owner, kind.name, int(user_id))
            if n:
                counts[kind.name] = n
        return counts

    # --- host-local working folders ---------------------------------------------------------

    def local_dir(self, kind: str) -> Path:
        """This host's folder of a derived kind (its user makes it with ``private_dir``)."""
        if not self.kind(kind).derived:
            raise ValueError(f"{kind} files are kept through the store, not in a local folder")
        return self.local.root / kind
