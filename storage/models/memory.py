"""Memory tables: the search index items, episodes and extraction cursors."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    Column,
    Index,
    LargeBinary,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class MemoryItem(SQLModel, table=True):
    """One searchable thing (a message, an episode or a fact) in the full-text and vector index.

    The source rows stay the ground truth; this row is a copy of their text plus an embedding.
    Full text lives beside it: an FTS5 table on SQLite, a ``tsv`` column on PostgreSQL (both
    made by migration 0002, not by this model).
    """

    __table_args__ = (
        UniqueConstraint("kind", "source_id", name="uq_memoryitem_source"),
        Index("ix_memoryitem_user_ts", "user_id", "ts"),
        Index("ix_memoryitem_user_id_id", "user_id", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    kind: str
    """``message``, ``episode`` or ``fact``."""
    source_id: int
    """The id of the message, episode or fact row."""
    ts: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """When it was said (a message), began (an episode) or was learned (a fact)."""
    ts_end: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    conversation_id: int | None = None
    channel: str = ""
    speaker: str = ""
    ref: str = ""
    """The id people know the source by: the channel's or import file's message id."""
    text: str = ""
    hidden: bool = False
    """A question put to lifebot about memory: kept, but never returned as evidence."""
    embedding: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    """float32 little-endian, L2-normalised."""
    embed_model: str | None = None


class Episode(SQLModel, table=True):
    """A conversation or a stretch of transcript, cut at time gaps, with a title and summary."""

    __table_args__ = (Index("ix_episode_user_start", "user_id", "start_at"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    scope: str
    """Which stream it belongs to: ``conv:<id>`` or ``chan:<channel>:<chat>``."""
    channel: str = ""
    title: str = ""
    summary: str = ""
    people: list[str] | None = Field(default=None, sa_column=Column(JSON))
    topics: list[str] | None = Field(default=None, sa_column=Column(JSON))
    start_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    end_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    source_message_ids: list[int] | None = Field(default=None, sa_column=Column(JSON))
    summarized: bool = False
    """True once the fast model wrote the title and summary (False: deterministic stand-in)."""
    summary_attempts: int = 0
    """Answers from the model that could not be used; after a bound it is not asked again."""
    summary_retry_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    """Not asked again before this time (backoff after an unusable answer)."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class MemoryCursor(SQLModel, table=True):
    """How far extraction has read one stream of messages (a conversation or a transcript)."""

    __table_args__ = (UniqueConstraint("user_id", "scope", name="uq_memorycursor_scope"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    scope: str
    last_message_id: int = 0
    """Every message of the scope up to this id has been through extraction."""
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


# --- jobs (issue 7) ----------------------------------------------------------------------------
