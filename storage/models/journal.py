"""Journal tables: entries with their scores, cached period summaries, per-user settings."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import JSON, Column, Date, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class JournalEntry(SQLModel, table=True):
    """One journal entry and the analytics computed once for it (recomputed on edit)."""

    __table_args__ = (
        UniqueConstraint("user_id", "ref", name="uq_journalentry_ref"),
        Index("ix_journalentry_user_day", "user_id", "day"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    ref: str
    """Where it came from, unique per user: ``msg:<message id>`` or ``file:<relative path>``."""
    day: date = Field(sa_column=Column(Date(), nullable=False))
    """The local date the entry is about."""
    written_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    text: str
    text_hash: str = ""
    """Hash of the text: a re-import with the same text changes nothing."""
    source: str = "chat"
    """``chat``, ``voice`` or ``import``."""
    message_id: int | None = None
    """The stored message it was written in, if any."""
    happiness: float | None = None
    """0-100, None until scored."""
    stress: float | None = None
    """0-100, None until scored."""
    energy: float | None = None
    """0-100, None until scored."""
    themes: list[str] | None = Field(default=None, sa_column=Column(JSON))
    people: list[str] | None = Field(default=None, sa_column=Column(JSON))
    reason: str = ""
    """The scorer's short reason for the numbers."""
    scorer: str = ""
    """``llm:<model>`` or ``lexicon``; empty until scored."""
    scored_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class JournalSummary(SQLModel, table=True):
    """A cached month or year in review; ``stale`` once an entry of its period changes."""

    __table_args__ = (UniqueConstraint("user_id", "period", name="uq_journalsummary_period"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    period: str
    """``YYYY-MM`` (a month) or ``YYYY`` (a year)."""
    text: str = ""
    """The summary as shown to the model (narrative, events, drivers, averages)."""
    by: str = ""
    """``llm:<model>`` or ``local`` (written without a model)."""
    stale: bool = False
    generated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class JournalSettings(SQLModel, table=True):
    """One user's journal preferences (the opt-in weekly review)."""

    __table_args__ = (UniqueConstraint("user_id", name="uq_journalsettings_user"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    weekly_review: bool = False
    """Opt-in: send a gentle weekly review."""
    review_weekday: int = 6
    """0 = Monday ... 6 = Sunday, in the user's time zone."""
    review_time: str = "19:00"
    """Local HH:MM."""
    set_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
