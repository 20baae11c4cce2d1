"""Scheduling tables: reminders, calendar events, proposals, the leader lease and job state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Index,
)
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class Reminder(SQLModel, table=True):
    """Something to tell the user at a time they chose, once or on a repeating schedule."""

    __table_args__ = (Index("ix_reminder_status_next", "status", "next_at"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    text: str
    """What to remind about ("call mom"); may be empty."""
    request: str = ""
    """The user's own words, kept for listing and debugging the parser."""
    next_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """The next time it fires (UTC)."""
    recurrence: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    """None for one-off; else ``{"kind": "weekly", "days": [0], "time": "09:00"}`` and kin."""
    timezone: str = "UTC"
    """The zone it was set in (recurrences follow the user's current zone)."""
    status: str = "active"
    """active, done, cancelled."""
    fired: int = 0
    """How many times it has fired (part of each push's unique key)."""
    place: str | None = None
    """Where it is about ("Jordan's house"), when the user named a place."""
    people: list[str] | None = Field(default=None, sa_column=Column(JSON))
    """Who it is about or with ("Ana Silva"), when the user named people."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class CalendarEvent(SQLModel, table=True):
    """An event in lifebot's own calendar."""

    __table_args__ = (
        Index("ix_calendarevent_user_start", "user_id", "start_at"),
        Index("ix_calendarevent_user_source", "user_id", "source"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    uid: str = Field(index=True, unique=True)
    """Stable id for ICS export."""
    title: str
    title_key: str = ""
    """Normalised title: same key within an hour means the same event (merge, not duplicate)."""
    start_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    end_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    place: str | None = None
    people: list[str] | None = Field(default=None, sa_column=Column(JSON))
    source: str = "manual"
    """manual, chat, pendant, agent, location; ``import`` (an ICS file), ``ics:<source id>``
    (a subscribed feed), ``caldav:<source id>`` (read from the user's CalDAV calendar)."""
    all_day: bool = False
    """Whole local days (an imported all-day event): shown without times, never blocks a stay."""
    cancelled_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class CalendarSource(SQLModel, table=True):
    """One of the user's own calendars lifebot reads (an ICS feed) or reads and writes (CalDAV).

    One per user, kind and address (migration 0024): linked twice, every event came in twice.
    On PostgreSQL the index holds the address's md5 (migration 0026): an index row there holds
    about 2.7 kB, and an address may be longer.
    """

    __table_args__ = (Index("ux_calendarsource_user_url", "user_id", "kind", "url", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    kind: str
    """``ics`` (read-only feed) or ``caldav`` (two-way)."""
    name: str
    """What the user calls it (the host name unless they gave one)."""
    url: str
    """The feed's URL, or the CalDAV calendar's collection URL."""
    username: str | None = None
    """CalDAV user name."""
    secret: str | None = None
    """The CalDAV password, Fernet-encrypted with the key from settings (never plain)."""
    last_synced_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    """When it was last read successfully."""
    last_error: str | None = None
    """Why the last read failed, in plain words (cleared by a good read)."""
    event_count: int = 0
    """How many occurrences the last good read stored."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class Proposal(SQLModel, table=True):
    """An event the fast model found in a chat or transcript, waiting for the user's yes or no."""

    __table_args__ = (Index("ix_proposal_status_expires", "status", "expires_at"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    title: str
    title_key: str = ""
    start_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    end_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    place: str | None = None
    people: list[str] | None = Field(default=None, sa_column=Column(JSON))
    source: str = "chat"
    """chat or pendant."""
    source_message_id: int | None = None
    status: str = "pending"
    """pending, accepted, declined, expired."""
    event_id: int | None = None
    """The calendar event a yes created or merged into."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    answered_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )


class JobLease(SQLModel, table=True):
    """The scheduler's leader lease, renewed by a heartbeat, with a fencing token."""

    name: str = Field(primary_key=True)
    holder: str
    """host:pid:random of the process holding it (``lifebot jobs`` shows it)."""
    token: int = 0
    """Grows by one at every takeover; writes made under an older token are refused."""
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    heartbeat_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class JobState(SQLModel, table=True):
    """The last result of each scheduled job (``lifebot jobs``), and scan cursors."""

    id: str = Field(primary_key=True)
    last_run_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    last_result: str = ""
    last_error: str | None = None
    runs: int = 0
    cursor: int = 0
    """For scanning jobs: the last message id looked at."""


# --- pendant (issue 6) -----------------------------------------------------------------------
