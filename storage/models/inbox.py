"""Channel updates answered before they were handled, kept until they are (an album's photos).

A webhook answers each photo of a Telegram album as soon as it comes: Telegram sends the next
only then, and the album is read once all are in. Answered, Telegram never sends it again,
so the photo is kept here first; once the album is stored as a message (dispatch's own
record, with its dedupe key), its rows go. Nothing here is a user's yet (the sender is not
looked up until the album is handled): no ``user_id``, and a row lives for seconds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class InboxItem(SQLModel, table=True):
    """One channel message answered to its channel and not handled yet."""

    __table_args__ = (
        UniqueConstraint("channel", "account", "chat_id", "external_id", name="uq_inboxitem"),
    )

    id: int | None = Field(default=None, primary_key=True)
    channel: str
    account: str
    """The bot account it came to (Telegram's bot id)."""
    chat_id: str
    external_id: str
    """The channel's id for the message (a redelivery of it is kept once)."""
    payload: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    """The message as the channel sent it (Telegram's ``Message`` object)."""
    received_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    taken_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    """When a process last took it on (received it, or took it over from a dead one)."""
    taken_by: str | None = None
    """The process that took it on (its ``LifebotProcess`` id): once that one stopped or is
    silent, another takes the item over at once. None: a process without a heartbeat."""
