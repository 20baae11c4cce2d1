"""The file store's PostgreSQL backend: every ``serve`` process on every host sees every file.

A file is a ``storedfile`` row plus its bytes in ``storedfilechunk`` rows of a megabyte
(``storage/models/files.py``). Writing one is a single transaction (the old version, if any,
goes in the same one), so a reader in another process sees the old file or the new one,
never half; a rename is one UPDATE. Large files move chunk by chunk: nothing holds more than a
megabyte of a file in memory except ``get``, which callers use for small files.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.db import Database
from storage.files.base import MissingFile, StoredInfo
from storage.files.private import FILE_MODE, private_dir
from storage.models.files import CHUNK_BYTES, StoredFile, StoredFileChunk

_FILE = StoredFile.__table__  # type: ignore[attr-defined]  # SQLModel's table
_CHUNK = StoredFileChunk.__table__  # type: ignore[attr-defined]  # SQLModel's table


class PostgresBackend:
    """Files in the database every process shares."""

    name = "postgresql"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def put(self, kind: str, key: str, owner: int | None, source: bytes | Path) -> StoredInfo:
        """Store ``source`` (bytes, or a file read in chunks) under ``key``, replacing any.

        The file's row is upserted first: that locks it, so two processes storing the same
        key at once take turns (the later one wins) instead of failing.
        """
        from sqlalchemy.dialects.postgresql import insert as upsert  # noqa: PLC0415

        now = datetime.now(UTC)
        async with self.db.engine.begin() as conn:
            row = upsert(_FILE).values(kind=kind, key=key, owner=owner, size=0, modified_at=now)
            file_id = (
                await conn.execute(
                    row.on_conflict_do_update(
                        constraint="uq_storedfile_kind_key",
                        set_={"owner": owner, "size": 0, "modified_at": now},
                    ).returning(_FILE.c.id)
                )
            ).scalar_one()
            await conn.execute(delete(_CHUNK).where(_CHUNK.c.file_id == file_id))
            size = 0
            seq = 0
            if isinstance(source, bytes):
                for start in range(0, len(source), CHUNK_BYTES):
                    piece = source[start : start + CHUNK_BYTES]
                    await _add_chunk(conn, file_id, seq, piece)
                    size, seq = size + len(piece), seq + 1
            else:
                with source.open("rb") as src:
                    while piece := await asyncio.to_thread(src.read, CHUNK_BYTES):
                        await _add_chunk(conn, file_id, seq, piece)
                        size, seq = size + len(piece), seq + 1
            await conn.execute(update(_FILE).where(_FILE.c.id == file_id).values(size=size))
        return StoredInfo(key, size, now)

    async def get(self, kind: str, key: str) -> bytes:
        """The file's bytes; MissingFile when there is none."""
        async with self.db.engine.connect() as conn:
            # One statement, so one snapshot: a file replaced meanwhile is read old or new.
            rows = (
                await conn.execute(
                    select(_FILE.c.id, _CHUNK.c.data)
                    .select_from(_FILE.outerjoin(_CHUNK, _CHUNK.c.file_id == _FILE.c.id))
                    .where(_FILE.c.kind == kind, _FILE.c.key == key)
                    .order_by(_CHUNK.c.seq)
                )
            ).all()
        if not rows:
            raise MissingFile(kind, key)
        return b"".join(bytes(r.data) for r in rows if r.data is not None)

    async def copy_to(self, kind: str, key: str, target: Path) -> int:
        """Write the file to ``target`` (0600) chunk by chunk; its size."""
        async with self.db.engine.connect() as conn, conn.begin():
            file_id = (
                await conn.execute(
                    select(_FILE.c.id).where(_FILE.c.kind == kind, _FILE.c.key == key)
                )
            ).scalar()
            if file_id is None:
                raise MissingFile(kind, key)
            await asyncio.to_thread(private_dir, target.parent)
            out = await asyncio.to_thread(_open_private, target)
            size = 0
            try:
                stream = await conn.stream(
                    select(_CHUNK.c.data)
                    .where(_CHUNK.c.file_id == file_id)
                    .order_by(_CHUNK.c.seq)
                    .execution_options(yield_per=4)
                )
                async for row in stream:
                    data = bytes(row.data)
                    await asyncio.to_thread(out.write, data)
                    size += len(data)
            finally:
                await asyncio.to_thread(out.close)
        return size

    async def stat(self, kind: str, key: str) -> StoredInfo | None:
        """Size and time of one file, or None."""
        async with self.db.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(_FILE.c.key, _FILE.c.size, _FILE.c.modified_at).where(
                        _FILE.c.kind == kind, _FILE.c.key == key
                    )
                )
            ).first()
        return None if row is None else StoredInfo(row.key, row.size, row.modified_at)

    async def listing(self, kind: str, prefix: str = "") -> list[StoredInfo]:
        """Every file of ``kind`` whose key starts with ``prefix``, sorted by key."""
        q = select(_FILE.c.key, _FILE.c.size, _FILE.c.modified_at).where(_FILE.c.kind == kind)
        if prefix:
            # Keys are checked to hold no LIKE wildcards but ``_``: escape it.
            q = q.where(_FILE.c.key.startswith(prefix, autoescape=True))
        async with self.db.engine.connect() as conn:
            rows = (await conn.execute(q.order_by(_FILE.c.key))).all()
        return [StoredInfo(r.key, r.size, r.modified_at) for r in rows]

    async def delete(self, kind: str, key: str) -> bool:
        """Remove one file (its chunks go with it); False when there was none."""
        async with self.db.engine.begin() as conn:
            result = await conn.execute(
                delete(_FILE).where(_FILE.c.kind == kind, _FILE.c.key == key)
            )
        return bool(_rowcount(result))

    async def delete_owner(self, kind: str, owner: int) -> int:
        """Remove every file of one user in a per-user kind; how many."""
        async with self.db.engine.begin() as conn:
            result = await conn.execute(
                delete(_FILE).where(_FILE.c.kind == kind, _FILE.c.owner == owner)
            )
        return _rowcount(result)

    async def rename(self, kind: str, old: str, new: str, owner: int | None) -> StoredInfo:
        """Give a file another key (replacing any file there); MissingFile when there is none."""
        now = datetime.now(UTC)
        async with self.db.engine.begin() as conn:
            if old != new:
                await conn.execute(delete(_FILE).where(_FILE.c.kind == kind, _FILE.c.key == new))
            row = (
                await conn.execute(
                    update(_FILE)
                    .where(_FILE.c.kind == kind, _FILE.c.key == old)
                    .values(key=new, owner=owner, modified_at=now)
                    .returning(_FILE.c.size)
                )
            ).first()
            if row is None:
                raise MissingFile(kind, old)
        return StoredInfo(new, int(row.size), now)

    async def total(self, kind: str) -> int:
        """Bytes of every file of ``kind``."""
        async with self.db.engine.connect() as conn:
            got = (
                await conn.execute(
                    select(func.coalesce(func.sum(_FILE.c.size), 0)).where(_FILE.c.kind == kind)
                )
            ).scalar()
        return int(got or 0)


async def _add_chunk(conn: AsyncConnection, file_id: int, seq: int, data: bytes) -> None:
    await conn.execute(insert(_CHUNK).values(file_id=file_id, seq=seq, data=data))


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def _open_private(path: Path) -> BinaryIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return os.fdopen(fd, "wb")
