"""Tables for lifebot's extra senses (issue 16): web search use and meeting transcript jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class UsageCount(SQLModel, table=True):
    """How often one user used a metered thing (a web search) on one UTC day."""

    __table_args__ = (UniqueConstraint("user_id", "what", "day", name="uq_usagecount_day"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    what: str
    """The metered thing, e.g. ``web_search``."""
    day: str
    """The UTC day counted, ``YYYY-MM-DD`` (text, so exports stay plain JSON)."""
    count: int = 0


class IngestJob(SQLModel, table=True):
    """A posted meeting transcript waiting to become an episode (debounced, retried)."""

    __table_args__ = (
        Index("ix_ingestjob_due", "status", "due_at"),
        Index("ix_ingestjob_meeting", "user_id", "meeting_key"),
        # One pending job per meeting (posts arriving together update it): the partial unique
        # index ``ux_ingestjob_pending`` is made by migration 0015 only. Declared here, its
        # dialect options would load SQLAlchemy's PostgreSQL and SQLite dialects at import,
        # 0.1 s of every CLI start.
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    meeting_key: str
    """The recorder's meeting id (or the Omi memory id): a newer post for it replaces this."""
    body: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    """The transcript in our own shape (``bot.web`` normalises both accepted bodies)."""
    status: str = "pending"
    """``pending``, ``done`` or ``failed`` (retried until the attempt bound)."""
    due_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """Not processed before this time (the debounce, then the retry delay)."""
    attempts: int = 0
    last_error: str | None = None
    episode_id: int | None = None
    """The episode it became, once done."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class DocumentChunk(SQLModel, table=True):
    """A piece of one page of a document a person sent (a PDF), searchable with its page."""

    __table_args__ = (Index("ix_documentchunk_message", "message_id"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    message_id: int
    """The message the document came with (its file is listed in that message's meta)."""
    name: str = ""
    """The file name, as sent."""
    page: int = 1
    """1-based page number (what citations show)."""
    text: str = ""
