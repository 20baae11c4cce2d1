"""Pendant tables: devices, their sessions and spooled audio segments."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Index,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class Device(SQLModel, table=True):
    """A pendant allowed to stream audio for one user; its token is stored only as a hash."""

    # A name is unique among live pendants (a revoked one stays its owner's when the name is
    # reused): the partial unique index ``ux_device_live_name`` is made by migration 0022 only
    # (declared here, its dialect options would load both dialects at import, as ``IngestJob``
    # says: a cold ``lifebot memory search`` paid for PostgreSQL's on SQLite).

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    name: str
    """Unique among live devices; also its sender id (channel ``device``, account ``default``)."""
    token_hash: str = Field(index=True)
    """SHA-256 of the token (tokens are 256-bit random, so a fast hash is enough)."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    last_seen_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    revoked_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )


class DeviceSession(SQLModel, table=True):
    """One stretch of a device's audio, spooled to ``<data_dir>/spool/<id>.pcm``."""

    id: str = Field(primary_key=True)
    device_id: int = Field(foreign_key="device.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    mode: str = "ask"
    language: str | None = None
    started_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    last_seen_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    closed_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    """Set when no reconnect may continue it; its audio is deleted once transcribed."""
    vad_cursor: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False))
    """Samples before this offset are cut into segments already (recovery resumes here)."""
    next_seq: int = 0
    """The number the next segment gets."""
    anchors: list[list[Any]] | None = Field(default=None, sa_column=Column(JSON))
    """``[sample offset, ISO wall time]`` pairs: when audio at an offset was spoken."""


class AudioSegment(SQLModel, table=True):
    """An utterance cut from a session's spool: waiting for, or done with, transcription."""

    __table_args__ = (
        UniqueConstraint("session_id", "seq", name="uq_audiosegment_seq"),
        Index("ix_audiosegment_status", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(foreign_key="devicesession.id", index=True)
    user_id: int = Field(foreign_key="user.id")
    seq: int
    start_sample: int = Field(sa_column=Column(BigInteger(), nullable=False))
    end_sample: int = Field(sa_column=Column(BigInteger(), nullable=False))
    mode: str = "ambient"
    """``ask`` (goes to the agent) or ``ambient`` (stored as what was said)."""
    status: str = "pending"
    """pending, done, empty (no words), failed."""
    text: str = ""
    attempts: int = 0
    error: str | None = None
    spoken_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """Wall time of the utterance's first sample."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    transcribed_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
