"""Telegram updates -> ``InboundMessage``: pure functions, no network, no state.

The adapter does the I/O (downloading and transcribing voice notes, answering button presses);
everything that decides *what a person said and where* lives here, unit-tested on plain PTB
objects (``Message.de_json``) without any server.

The message id is Telegram's ``message_id`` (unique within a chat, the same when an update is
redelivered); a button press is keyed by its callback query id, so every press is one message.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass
from datetime import datetime

from telegram import CallbackQuery, Message, MessageEntity
from telegram.constants import ChatType

from bot.messages import Address, Attachment, InboundMessage, SharedLocation

CHANNEL = "telegram"


def person_text(message: Message, *, allow_groups: bool, bot_id: int, username: str) -> str | None:
    """What a person wrote (caption for media, mention removed); None when it is not for us.

    Ignored: messages without a human sender (channels, other bots), group messages when
    groups are not allowed, and group messages that do not address the bot.
    """
    user = message.from_user
    if user is None or user.is_bot:
        return None
    text = message.text or message.caption or ""
    if message.chat.type == ChatType.PRIVATE:
        return text
    if not allow_groups:
        return None
    ok, text = addressed(message, text, bot_id, username)
    return text if ok else None


def voice_attachment(message: Message) -> Attachment | None:
    """The voice note or audio file to transcribe, as an attachment; None for other messages."""
    media = message.voice or message.audio
    if media is None:
        return None
    return Attachment(
        "voice" if message.voice else "audio",
        mime_type=media.mime_type,
        size=media.file_size,
        name=getattr(media, "file_name", None),
    )


@dataclass(frozen=True, slots=True)
class Picture:
    """A photo or an image file on Telegram's servers, still to be fetched."""

    file_id: str
    """What ``getFile`` takes."""
    size: int | None
    """Bytes, when Telegram says (checked against the limit before any download)."""
    mime_type: str
    name: str
    kind: str = "image"
    """``image`` (a photo or image file) or ``document`` (a PDF)."""


def picture(message: Message) -> Picture | None:
    """The file to keep: the largest size of a photo, an image file or a PDF document."""
    if message.photo:
        best = message.photo[-1]  # Telegram lists the sizes smallest first
        return Picture(best.file_id, best.file_size, "image/jpeg", f"{best.file_unique_id}.jpg")
    doc = message.document
    if doc is not None and doc.mime_type == "application/pdf":
        return Picture(
            doc.file_id, doc.file_size, doc.mime_type, doc.file_name or "document.pdf", "document"
        )
    if doc is not None and (doc.mime_type or "").startswith("image/"):
        return Picture(
            doc.file_id, doc.file_size, doc.mime_type or "image/jpeg", doc.file_name or "image"
        )
    return None


def topic_of(message: Message) -> str | None:
    """The forum topic (``message_thread_id``) a message was sent in, if any.

    Only ``is_topic_message`` counts: in supergroups ``message_thread_id`` is also set on
    plain reply chains, which are not separate conversations.
    """
    if message.is_topic_message and message.message_thread_id is not None:
        return str(message.message_thread_id)
    return None


def replied_to(message: Message) -> Message | None:
    """The message ``message`` really answers; None when it answers nothing.

    In a topic, a message that replies to nothing still names the topic's opening service
    message (``forum_topic_created``, whose id is the topic's id) as the one it replies to
    (tdlib/telegram-bot-api#356): that is where it was written, not what it answers. Outside
    topics a reply chain's id is its first message's too, so there a reply to it is real.
    """
    reply = message.reply_to_message
    if reply is None:
        return None
    if reply.forum_topic_created is not None or (
        message.is_topic_message and reply.message_id == message.message_thread_id
    ):
        return None
    return reply


def from_message(
    message: Message, *, account: str, text: str, attachments: list[Attachment] | None = None
) -> InboundMessage:
    """A person's message (``text`` already addressed or transcribed) as an InboundMessage."""
    user = message.from_user
    assert user is not None  # person_text() let only messages from a person through
    reply = replied_to(message)
    return InboundMessage(
        address=Address(CHANNEL, account, str(message.chat.id), topic_of(message)),
        sender_id=str(user.id),
        message_id=str(message.message_id),
        text=text,
        received_at=message.date,
        sender_name=user.full_name,
        attachments=list(attachments or []),
        reply_to=str(reply.message_id) if reply else None,
        private=message.chat.type == ChatType.PRIVATE,
        raw={"chat_type": message.chat.type},
    )


def from_press(
    query: CallbackQuery, message: Message, *, account: str, data: str, received_at: datetime
) -> InboundMessage:
    """A button press on ``message`` (its decoded ``data``) as an InboundMessage."""
    return InboundMessage(
        address=Address(CHANNEL, account, str(message.chat.id), topic_of(message)),
        sender_id=str(query.from_user.id),
        message_id=f"cb:{query.id}",
        text=data,
        received_at=received_at,
        sender_name=query.from_user.full_name,
        callback_data=data,
        reply_to=str(message.message_id),
        private=message.chat.type == ChatType.PRIVATE,
        raw={"chat_type": message.chat.type},
    )


def shared_location(message: Message, *, account: str, edited: bool) -> InboundMessage | None:
    """A position a person shared in a private chat (or an update of a live one); else None.

    A live location is one message whose edits carry the new positions: each edit becomes its
    own inbound message, keyed by the edit time so that none is mistaken for a redelivery.
    """
    loc = message.location
    user = message.from_user
    if loc is None or user is None or user.is_bot or message.chat.type != ChatType.PRIVATE:
        return None
    ts = message.edit_date if edited and message.edit_date is not None else message.date
    key = f"{message.message_id}:{int(ts.timestamp())}" if edited else str(message.message_id)
    return InboundMessage(
        address=Address(CHANNEL, account, str(message.chat.id)),
        sender_id=str(user.id),
        message_id=f"loc:{key}",
        text="",
        received_at=ts,
        sender_name=user.full_name,
        raw={"chat_type": message.chat.type},
        location=SharedLocation(
            lat=loc.latitude,
            lon=loc.longitude,
            ts=ts,
            accuracy_m=loc.horizontal_accuracy,
            # Read from the wire form: the attribute warns while PTB changes its type.
            live=loc.to_dict().get("live_period") is not None,
            update=edited,
        ),
    )


def addressed(message: Message, text: str, bot_id: int, username: str) -> tuple[bool, str]:
    """In a group: only when replied to, mentioned, or sent a /command@thisbot."""
    reply = replied_to(message)
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot_id:
        return True, text
    handle = f"@{username}".lower()
    kinds: list[str | None] = [
        MessageEntity.MENTION,
        MessageEntity.TEXT_MENTION,
        MessageEntity.BOT_COMMAND,
    ]
    entities = (
        message.parse_entities(kinds) if message.text else message.parse_caption_entities(kinds)
    )
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.lower() == handle:
            return True, re.sub(r"[ \t]{2,}", " ", text.replace(value, "")).strip()
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True, text
        if entity.type == MessageEntity.BOT_COMMAND and value.lower().endswith(handle):
            return True, text
    return False, text


def stale_press(query: CallbackQuery, msg: Message, used: Container[tuple[int, int]]) -> bool:
    """A press on a used keyboard, or on a button the message no longer carries."""
    if (msg.chat.id, msg.message_id) in used or not query.data:
        return True
    markup = msg.reply_markup
    wires = [b.callback_data for row in markup.inline_keyboard for b in row] if markup else []
    return query.data not in wires
