"""Builders for test data."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from bot.messages import Address, InboundMessage

_ids = itertools.count(1)


def make_inbound(
    text: str,
    *,
    sender: str = "u1",
    channel: str = "fake",
    chat: str | None = None,
    message_id: str | None = None,
    account: str = "acct",
    name: str | None = None,
    callback_data: str | None = None,
) -> InboundMessage:
    """An inbound message from ``sender`` in their DM (chat id = sender id unless given)."""
    return InboundMessage(
        address=Address(channel, account, chat or sender),
        sender_id=sender,
        message_id=message_id or f"m{next(_ids)}",
        text=text,
        received_at=datetime.now(UTC),
        sender_name=name or sender,
        callback_data=callback_data,
    )
