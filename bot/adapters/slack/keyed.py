"""Pushes Slack can be asked about: an idempotency key in message metadata, found again later.

The outbox tags every push with its delivery key (``KeyedChannel``). On Slack the key travels as
message metadata (``event_type`` ``lifebot_push``), which stays attached to the message; after a
crash between "Slack accepted it" and "the receipt was stored", the adapter reads the recent
history of the conversation (``conversations.history`` with ``include_all_metadata``) and looks
for a message of our own bot carrying that key.

The look-back is bounded (``LOOKBACK`` messages): a push still waiting for its receipt was sent
just before the process stopped, so it is among the newest messages of that DM.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.adapters.slack.api import SlackCalls
from bot.adapters.slack.events import BotIdentity
from bot.errors import ChannelError

log = logging.getLogger(__name__)

PUSH_EVENT = "lifebot_push"
"""The metadata ``event_type`` of a keyed push."""
LOOKBACK = 200
"""How many of a conversation's newest messages are searched for a key."""
PAGE = 100
"""Messages per ``conversations.history`` page (Slack's default; it suggests at most 200)."""

History = Callable[..., Awaitable[Any]]
"""``AsyncWebClient.conversations_history`` (keyword arguments only)."""


def push_metadata(key: str, part: int, parts: int) -> dict[str, Any]:
    """Metadata for part ``part`` (0-based) of ``parts`` of the push keyed ``key``.

    Every part carries the key, so a push cut short by a crash between its parts is still
    recognised (and not sent again in full).
    """
    return {"event_type": PUSH_EVENT, "event_payload": {"key": key, "part": part, "parts": parts}}


def _ours(message: dict[str, Any], bot: BotIdentity) -> bool:
    """Posted by this app's bot (another app could reuse our event type)."""
    if bot.bot_id is not None and message.get("bot_id") == bot.bot_id:
        return True
    return message.get("user") == bot.bot_user_id


def _part_with(message: dict[str, Any], key: str) -> int | None:
    """The part number when ``message`` is a part of the push ``key``, else None."""
    meta = message.get("metadata")
    if not isinstance(meta, dict) or meta.get("event_type") != PUSH_EVENT:
        return None
    payload = meta.get("event_payload")
    if not isinstance(payload, dict) or payload.get("key") != key:
        return None
    part = payload.get("part", 0)
    return part if isinstance(part, int) else 0


async def find_push(
    calls: SlackCalls,
    history: History,
    bot: BotIdentity,
    channel: str,
    key: str,
    *,
    lookback: int = LOOKBACK,
) -> str | None:
    """The ``ts`` of the first message of the push ``key`` in ``channel``; None if not found.

    Searches the newest ``lookback`` messages. Errors are lifebot ``ChannelError``s (a missing
    ``im:history`` scope included), so the outbox leaves the push undecided and asks again.
    """
    found: dict[int, str] = {}
    seen, cursor = 0, None
    while seen < lookback:
        args: dict[str, Any] = {
            "channel": channel,
            "limit": min(PAGE, lookback - seen),
            "include_all_metadata": True,
        }
        if cursor:
            args["cursor"] = cursor
        resp = await calls.call("conversations.history", functools.partial(history, **args))
        messages = resp.get("messages")
        if not isinstance(messages, list):
            raise ChannelError("conversations.history failed: Slack's answer had no messages")
        seen += len(messages)
        for message in messages:
            if not isinstance(message, dict) or not _ours(message, bot):
                continue
            part = _part_with(message, key)
            if part is not None and message.get("ts"):
                found.setdefault(part, str(message["ts"]))
        cursor = (resp.get("response_metadata") or {}).get("next_cursor")
        if not messages or not resp.get("has_more") or not cursor:
            break
    if not found:
        return None
    if 0 not in found:
        # Its first part is beyond the look-back: the push arrived, at least in part.
        log.warning("slack: push %s found only from part %s on", key, min(found))
    return found.get(0) or found[min(found)]
