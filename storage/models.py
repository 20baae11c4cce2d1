"""SQLModel tables. Raw messages are the ground truth; everything else hangs off a user id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Dialect,
    Index,
    LargeBinary,
    UniqueConstraint,
)
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (the only time stored)."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes as UTC and always gives them back aware (SQLite drops zones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes; normalise aware ones to UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; pass an aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to what SQLite returns naive."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class User(SQLModel, table=True):
    """A person lifebot serves; channel identities map onto one user."""

    id: int | None = Field(default=None, primary_key=True)
    display_name: str = ""
    is_owner: bool = False
    timezone: str = "UTC"
    preferred_channel: str | None = None
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    # --- schedule settings (jobs, issue 7) ---
    briefing_time: str = "07:30"
    """Local HH:MM of the morning briefing."""
    briefing_enabled: bool = True
    briefing_set_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    """When the briefing settings last changed: earlier briefing times are never owed."""
    quiet_start: str | None = "22:00"
    """Local HH:MM where quiet hours begin; None turns quiet hours off."""
    quiet_end: str | None = "07:00"


class ChannelIdentity(SQLModel, table=True):
    """A sender id on one channel account, linked to a user."""

    __table_args__ = (UniqueConstraint("channel", "account", "sender_id", name="uq_identity"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    channel: str
    account: str
    sender_id: str
    chat_id: str | None = None
    """Where to push to this identity (its DM chat), learned from its last message."""
    display_name: str | None = None
    unreachable_reason: str | None = None
    unreachable_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class Conversation(SQLModel, table=True):
    """One chat on one channel for one user."""

    __table_args__ = (
        UniqueConstraint("user_id", "channel", "account", "chat_id", "thread_id", name="uq_conv"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    channel: str
    account: str
    chat_id: str
    thread_id: str = ""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    last_message_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )


class Message(SQLModel, table=True):
    """Every message in and out, and every tool call and result of an agent turn."""

    __table_args__ = (
        UniqueConstraint("dedupe_key", name="uq_message_dedupe"),
        Index("ix_message_user_created", "user_id", "created_at"),
        Index("ix_message_conv_created", "conversation_id", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int | None = Field(default=None, foreign_key="user.id")
    conversation_id: int | None = Field(default=None, foreign_key="conversation.id")
    direction: str = "in"
    """``in`` (from a person), ``out`` (to a person) or ``internal`` (tool traffic)."""
    role: str = "user"
    """``user``, ``assistant`` or ``tool``: the LLM role this row replays as."""
    channel: str
    account: str = ""
    chat_id: str = ""
    sender_id: str | None = None
    external_id: str | None = None
    """The channel's id for this message (inbound id, or the receipt of an outbound one)."""
    dedupe_key: str | None = None
    text: str = ""
    status: str = "received"
    """Inbound: received, answered, pending_retry, refused, failed. Outbound: stored, sent."""
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    citations: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    reply_to_id: int | None = None
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    """Channel extras: speaker, transcript segment times, import ids, links."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class PairingRequest(SQLModel, table=True):
    """A pairing code given to a stranger, or a link code given to a known user."""

    id: int | None = Field(default=None, primary_key=True)
    code: str = Field(index=True, unique=True)
    purpose: str = "pair"
    """``pair`` (a stranger asks in) or ``link`` (a user joins another channel)."""
    channel: str
    account: str
    sender_id: str
    chat_id: str
    display_name: str | None = None
    user_id: int | None = Field(default=None, foreign_key="user.id")
    """For link codes: the user the new identity joins."""
    status: str = "pending"
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class Fact(SQLModel, table=True):
    """A short statement about the user (the memory issue deepens this)."""

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    text: str
    category: str = "notes"
    text_hash: str = ""
    source_message_ids: list[int] | None = Field(default=None, sa_column=Column(JSON))
    superseded_by: int | None = None
    forgotten_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    origin: str = "explicit"
    """``explicit`` (the user asked) or ``extracted`` (the fast model found it)."""


class Task(SQLModel, table=True):
    """A to-do item."""

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    title: str
    due_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    done_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class Delivery(SQLModel, table=True):
    """One push or reply handed to a channel; ``key`` makes scheduled pushes exactly-once."""

    __table_args__ = (
        UniqueConstraint("key", name="uq_delivery_key"),
        Index("ix_delivery_status_due", "status", "due_at"),
        Index("ix_delivery_kind_due", "kind", "due_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    key: str | None = None
    kind: str = "reply"
    message_id: int | None = Field(default=None, foreign_key="message.id")
    channel: str | None = None
    chat_id: str | None = None
    status: str = "pending"
    """pending, sending, delivered, failed, skipped."""
    receipt: str | None = None
    """The channel's message id: the proof that it was delivered."""
    attempts: int = 0
    last_error: str | None = None
    payload: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    due_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    delivered_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    # --- outbox (jobs, issue 7) ---
    account: str | None = None
    """The channel account the push went out on (with channel and chat_id: the address)."""
    claimed_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    """When the sender marked it ``sending``: the moment before the channel was called."""


# --- memory (issue 3) ------------------------------------------------------------------------


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
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class CalendarEvent(SQLModel, table=True):
    """An event in lifebot's own calendar."""

    __table_args__ = (Index("ix_calendarevent_user_start", "user_id", "start_at"),)

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
    """manual, chat, pendant, agent."""
    cancelled_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    updated_at: datetime = Field(
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
    """The scheduler's leader lease (SQLite; PostgreSQL uses an advisory lock instead)."""

    name: str = Field(primary_key=True)
    holder: str
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


class Device(SQLModel, table=True):
    """A pendant allowed to stream audio for one user; its token is stored only as a hash."""

    __table_args__ = (UniqueConstraint("name", name="uq_device_name"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    name: str
    """Unique; also the device's sender id (channel ``device``, account ``default``)."""
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
