"""The one message type at the core: adapters translate to and from these, nothing else does."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


def clean_text(text: str) -> str:
    """Text every database and wire accepts: lone surrogates become U+FFFD, NULs are dropped.

    Channels hand over what people type, and some clients send half an emoji (a lone UTF-16
    surrogate) or a NUL; SQLite's UTF-8 and PostgreSQL's text type reject them.
    """
    if text.isascii() and "\x00" not in text:
        return text
    out = text.replace("\x00", "")
    try:
        out.encode("utf-8")
    except UnicodeEncodeError:
        out = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in out)
    return out


def clean_texts(value: Any) -> Any:
    """``value`` (parsed JSON) with every text in it, keys too, passed through ``clean_text``."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_texts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_texts(v) for v in value]
    return value


def file_name(name: str) -> str:
    """A sent file's name as kept and shown: no folders, no runs of spaces, at most 120 characters.

    Control and format characters go too: a terminal escape would reach the operator's
    terminal through the CLI and the log, and a right-to-left override disguises the ending.
    """
    shown = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf"))
    return " ".join(shown.replace("/", " ").replace("\\", " ").split())[-120:]


@dataclass(frozen=True, slots=True)
class Address:
    """Where a conversation lives on a channel."""

    channel: str
    """Channel name: ``console``, ``telegram``, ``slack``, ``device``."""
    account: str
    """Which bot account on that channel (Telegram bot id, Slack team id, ``default``)."""
    chat_id: str
    """The chat, DM or device session the message belongs to."""
    thread_id: str | None = None
    """A thread inside the chat (Slack thread ts), if any."""


@dataclass(frozen=True, slots=True)
class Button:
    """A button offered with an outbound message; pressing it sends ``data`` back."""

    label: str
    data: str
    row: int | None = None
    """Buttons with the same row number share a row where the channel lays out rows
    (Telegram); None lets the channel decide."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with an inbound message (voice note, audio file, photo)."""

    kind: str
    """``voice``, ``audio``, ``image`` or ``file``."""
    path: str | None = None
    """Local path once downloaded."""
    mime_type: str | None = None
    size: int | None = None
    name: str | None = None
    data: bytes | None = field(default=None, repr=False)
    """The bytes, for a small file fetched into memory (a photo, already size-capped)."""


@dataclass(frozen=True, slots=True)
class Image:
    """A picture sent with an outbound message (a chart); channels without pictures skip it."""

    data: bytes
    """The encoded image."""
    alt: str
    """The picture in words (the message text already says as much for voice channels)."""
    mime_type: str = "image/png"
    name: str = "chart.png"


@dataclass(frozen=True, slots=True)
class Citation:
    """A source backing part of an answer, shown as ``[index]``."""

    index: int
    kind: str
    """``message``, ``episode``, ``fact`` or ``transcript``."""
    source_id: str
    channel: str | None = None
    ts: datetime | None = None
    snippet: str = ""
    link: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for storage (``ts`` as an ISO 8601 string)."""
        data = asdict(self)
        data["ts"] = self.ts.isoformat() if self.ts is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Citation:
        """Back from storage (an ISO ``ts`` string becomes an aware datetime again)."""
        fields = dict(data)
        if isinstance(fields.get("ts"), str):
            fields["ts"] = datetime.fromisoformat(fields["ts"])
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class SharedLocation:
    """A position a person shared in chat (a location, or one update of a live location)."""

    lat: float
    """Latitude, degrees."""
    lon: float
    """Longitude, degrees."""
    ts: datetime
    """When the position was taken (the message or edit time)."""
    accuracy_m: float | None = None
    """Horizontal accuracy radius in metres, when the channel gives one."""
    live: bool = False
    """Part of a live location (updates follow as edits)."""
    update: bool = False
    """An update of a live location already being shared (store it, never answer it)."""


@dataclass(slots=True)
class InboundMessage:
    """A message from a person, normalised from any channel."""

    address: Address
    sender_id: str
    """The sender's id on the channel (Telegram user id, Slack user id)."""
    message_id: str
    """The channel's id for this message; with the address it forms the dedupe key."""
    text: str
    received_at: datetime
    sender_name: str | None = None
    attachments: list[Attachment] = field(default_factory=list)
    callback_data: str | None = None
    """Set when the message is a button press rather than typed text."""
    reply_to: str | None = None
    private: bool = True
    """A one-to-one chat (DM). Scheduled pushes only ever go to private chats."""
    overheard: bool = False
    """Speech the pendant picked up in ambient mode (after the wake phrase): anyone near the
    wearer may have said it, so it is answered but never changes the user's state."""
    raw: dict[str, Any] = field(default_factory=dict)
    location: SharedLocation | None = None
    """Set when the message is a shared position rather than words."""
    user_id: int | None = None
    """The lifebot user who sent it, when the channel itself proved who that is (the web
    page's signed-in session or a personal API token); None: dispatch looks the sender up by
    channel identity. Chat adapters never set it."""
    accepted: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Called (once or more; it must be idempotent) as soon as dispatch has stored the message
    in its conversation, or decided not to. A webhook answers only then, so that behind a load
    balancer the next message, sent after that answer, is stored after this one."""

    def accept(self) -> None:
        """Tell the channel the message is stored (see ``accepted``)."""
        if self.accepted is not None:
            self.accepted()

    @property
    def dedupe_key(self) -> str:
        """Channel + account + chat + message id: unique among all inbound messages."""
        a = self.address
        return f"{a.channel}:{a.account}:{a.chat_id}:{self.message_id}"


@dataclass(slots=True)
class OutboundMessage:
    """A message lifebot sends: a reply, or a scheduled push."""

    address: Address
    text: str
    buttons: list[Button] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    reply_to: str | None = None
    """The channel message id this answers, where the channel can thread replies."""
    kind: str = "reply"
    """``reply``, ``notice``, ``pairing``, ``briefing``, ``reminder``, ``proposal``."""
    image: Image | None = None
    """A picture to show with the text (Telegram sends it as a photo); optional."""
    speak: bool = False
    """Say it aloud too where the channel can (a Telegram voice note after the text)."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """Proof of delivery: the channel's own id for the message it accepted."""

    channel: str
    message_id: str
    chat_id: str | None = None


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """Told to hooks after a turn's messages are stored (memory extraction listens)."""

    user_id: int
    """Whose turn it was."""
    conversation_id: int
    """The conversation it belongs to."""
    inbound_id: int
    """The stored inbound message."""
    reply_id: int | None
    """The stored reply, if one was made."""
    status: str
    """How dispatch ended: answered, command, llm_down, failed, ..."""
