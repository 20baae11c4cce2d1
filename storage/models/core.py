"""The spine's tables: users, identities, conversations, messages, pairing, facts, tasks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Index,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


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
    voice_replies: str = Field(default="off", sa_column_kwargs={"server_default": "off"})
    """Answers as voice notes too (Telegram): ``off``, ``inbound`` (to a voice note), ``always``."""
    date_order: str | None = None
    """How the user writes numeric dates: ``dmy`` (31/12), ``mdy`` (12/31); None: guessed
    from the time zone (month first in the United States and a few others)."""


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
    title: str | None = None
    """The thread's name, set from its first words (or the fast model); /new clears it."""
    summary: str | None = None
    """Older turns of the thread in short, given to the model instead of being cut off."""
    summary_through: int | None = None
    """The id of the newest message the summary covers."""


class Message(SQLModel, table=True):
    """Every message in and out, and every tool call and result of an agent turn."""

    __table_args__ = (
        UniqueConstraint("dedupe_key", name="uq_message_dedupe"),
        Index("ix_message_user_created", "user_id", "created_at"),
        Index("ix_message_conv_created", "conversation_id", "created_at"),
        Index("ix_message_conv_id", "conversation_id", "id"),  # a thread's history, in order
        # A thread finds the message it hangs from by that message's channel id (Slack's ts).
        Index("ix_message_external", "user_id", "external_id"),
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

    # One live fact (neither forgotten nor superseded) per user and ``text_hash``: the partial
    # unique index ``ux_fact_live_words`` is made by migration 0023 only (declared here, its
    # dialect options would load both dialects at import, as ``IngestJob`` says).

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


class PendingAnswer(SQLModel, table=True):
    """A question the bot asked: the user's next plain message completes a command line.

    "What was this place?" after a location proposal, "What should I call it?" after Rename.
    Only the very next plain message counts; any other message clears the question.
    """

    user_id: int = Field(foreign_key="user.id", primary_key=True)
    command: str
    """The command line the answer completes (``/place name 12``)."""
    since: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """From when a message counts as the answer (after quiet hours hold the question)."""
    until: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """After this the question lapses."""
