"""Slack events and interactions -> ``InboundMessage``: which to ignore, where they live, their id.

The message id is the Slack message ``ts`` (unique within a channel, the same in every retry
and redelivery). Slack's ``event_id`` would not do: one message that mentions the app in a DM
can arrive twice, as ``message.im`` and as ``app_mention``, with different event ids but the
same channel and ts. Keyed by ts, both collapse onto one dedupe key in dispatch, so one message
gets one answer however many times and ways Slack delivers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.adapters.slack.format import from_slack
from bot.messages import Address, InboundMessage

CHANNEL = "slack"
PASS_SUBTYPES = {None, "file_share", "thread_broadcast"}
"""Message subtypes a person wrote; edits, deletes, joins and bot posts are ignored."""
AUDIO_TYPES = {"mp3", "m4a", "mp4", "wav", "ogg", "oga", "opus", "webm", "flac", "aac", "amr"}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in its workspace (from ``auth.test`` at start)."""

    team_id: str
    bot_user_id: str
    bot_id: str | None


@dataclass(slots=True)
class Incoming:
    """An inbound message still to be completed in the background (audio to transcribe)."""

    msg: InboundMessage
    audio: list[dict[str, Any]]
    """Slack file objects of audio files to transcribe into the text."""
    images: list[dict[str, Any]] = field(default_factory=list)
    """Slack file objects of pictures and PDF documents to fetch and keep with the message."""
    unreadable: bool = False
    """Only files lifebot cannot open were sent, and no words: the person is told so."""


def is_dm(channel: str) -> bool:
    """Slack DM channel ids start with D."""
    return channel.startswith("D")


def is_audio(file: dict[str, Any]) -> bool:
    """True for audio files and Slack audio clips."""
    mime = str(file.get("mimetype") or "")
    if mime.startswith("audio/") or file.get("subtype") == "slack_audio":
        return True
    return str(file.get("filetype") or "").lower() in AUDIO_TYPES and not mime.startswith(
        ("image/", "text/", "application/")
    )


def is_image(file: dict[str, Any]) -> bool:
    """True for pictures (photos, screenshots) Slack hosts."""
    return str(file.get("mimetype") or "").startswith("image/")


def is_pdf(file: dict[str, Any]) -> bool:
    """True for PDF documents (kept and read page by page)."""
    return str(file.get("mimetype") or "") == "application/pdf"


def _ignored(event: dict[str, Any], bot: BotIdentity) -> bool:
    return (
        event.get("subtype") not in PASS_SUBTYPES
        or bool(event.get("bot_id"))
        or event.get("user") in (None, bot.bot_user_id)
        or not event.get("ts")
        or not event.get("channel")
    )


def from_message_event(
    body: dict[str, Any], event: dict[str, Any], bot: BotIdentity, now: datetime
) -> Incoming | None:
    """A DM (``message.im``) or a mention (``app_mention``); None for what we ignore.

    Mentions in a channel are answered in a thread (the mention's own, or a new one under it);
    a DM is answered in the DM, in a thread only if the person wrote in one. A mention inside a
    DM is treated exactly like the DM message it also arrives as, so both deliveries agree.
    """
    if _ignored(event, bot):
        return None
    channel = str(event["channel"])
    kind = str(event.get("type"))
    dm = is_dm(channel)
    if kind == "message" and not (dm or event.get("channel_type") == "im"):
        return None  # channel chatter: only mentions are for us
    thread = event.get("thread_ts")
    if kind == "app_mention" and not dm:
        thread = thread or event["ts"]
    files = (event.get("files") or []) if dm else []
    audio = [f for f in files if is_audio(f)]
    images = [f for f in files if is_image(f) or is_pdf(f)]
    text = from_slack(str(event.get("text") or ""), bot.bot_user_id)
    unreadable = not text and not audio and not images and bool(files)
    if not text and not audio and not images and not unreadable:
        return None
    msg = InboundMessage(
        address=Address(CHANNEL, bot.team_id, channel, thread),
        sender_id=str(event["user"]),
        message_id=str(event["ts"]),
        text=text,
        received_at=now,
        reply_to=str(event["ts"]),
        private=dm,
        raw={
            "event_id": body.get("event_id"),
            "event_type": kind,
            "client_msg_id": event.get("client_msg_id"),
            "team_id": body.get("team_id"),
        },
    )
    return Incoming(msg, audio, images, unreadable)


def from_button(
    body: dict[str, Any], action: dict[str, Any], bot: BotIdentity, now: datetime
) -> InboundMessage | None:
    """A click on one of our buttons: the button's value arrives as ``callback_data``.

    Its id is ``action:<action_ts>``: a redelivered interaction repeats it, a second click
    does not.
    """
    user = (body.get("user") or {}).get("id")
    container = body.get("container") or {}
    message = body.get("message") or {}
    channel = container.get("channel_id") or (body.get("channel") or {}).get("id")
    stamp = action.get("action_ts") or body.get("trigger_id")
    if not user or not channel or not stamp:
        return None
    thread = message.get("thread_ts") or container.get("thread_ts")
    value = str(action.get("value") or "")
    label = str(((action.get("text") or {}).get("text")) or value)
    return InboundMessage(
        address=Address(CHANNEL, bot.team_id, str(channel), thread),
        sender_id=str(user),
        message_id=f"action:{stamp}",
        # The value is also the text: commands read the text, and "/tasks" is what the
        # person chose to say by clicking.
        text=value,
        received_at=now,
        callback_data=value,
        private=is_dm(str(channel)),
        reply_to=message.get("ts") or container.get("message_ts"),
        raw={"label": label, "action_id": action.get("action_id")},
    )
