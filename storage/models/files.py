"""The file store's PostgreSQL backend: stored files and their bytes, in chunks.

Used only when the database is PostgreSQL (``storage/files``); on SQLite the store is a
folder and these tables stay empty. A file is one ``storedfile`` row (its kind, key, size and
time) and its bytes in ``storedfilechunk`` rows of at most ``CHUNK_BYTES``, so a large file is
written and read piece by piece and never held in one query.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow

CHUNK_BYTES = 1024 * 1024
"""Bytes per chunk row: small enough for one round trip, large enough to be few."""


class StoredFile(SQLModel, table=True):
    """One stored file: which kind, its key within the kind, its size and when it was written."""

    __table_args__ = (
        UniqueConstraint("kind", "key", name="uq_storedfile_kind_key"),
        Index("ix_storedfile_owner", "kind", "owner"),
    )

    id: int | None = Field(default=None, primary_key=True)
    kind: str
    """A file kind some registered feature declares (``photos``)."""
    key: str
    """The file's name within its kind, ``/``-separated (``12/345-0.jpg``)."""
    owner: int | None = None
    """The user id a per-user kind's key starts with (delete-my-data finds them by it)."""
    size: int = Field(sa_column=Column(BigInteger(), nullable=False))
    """Bytes."""
    modified_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    """When it was written or renamed."""


class StoredFileChunk(SQLModel, table=True):
    """A piece of a stored file's bytes."""

    file_id: int = Field(
        sa_column=Column(
            Integer(), ForeignKey("storedfile.id", ondelete="CASCADE"), primary_key=True
        )
    )
    seq: int = Field(sa_column=Column(Integer(), primary_key=True, autoincrement=False))
    """0, 1, 2... in file order."""
    data: bytes = Field(sa_column=Column(LargeBinary(), nullable=False))
