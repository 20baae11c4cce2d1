"""The ChannelAdapter port and the optional streaming extension."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from bot.messages import Address, InboundMessage, OutboundMessage, Receipt

MessageHandler = Callable[[InboundMessage], Awaitable[object]]
UNSUPPORTED = (
    "I can read text messages, voice notes, pictures and PDF documents; "
    "I can't open this kind of message yet."
)
"""What a person is told when they send only something no channel of ours can read (a
sticker, a Word file): in the same words on every channel, and without asking the model."""
SenderCheck = Callable[[str, str, str], Awaitable[bool]]
"""``is_known(channel, account, sender_id)``: may this sender use lifebot? Adapters ask it
before any costly work for a message (downloading and transcribing audio)."""


@runtime_checkable
class ChannelAdapter(Protocol):
    """A channel: starts receiving, sends messages, stops."""

    name: str
    """The channel name used in addresses (``telegram``, ``slack``, ``console``, ``device``)."""

    async def start(self, on_message: MessageHandler) -> None:
        """Begin receiving; every inbound message is awaited through ``on_message``."""
        ...

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Deliver a message; return the channel's receipt or raise a ChannelError."""
        ...

    async def stop(self) -> None:
        """Stop receiving and release connections."""
        ...


class ReplyStream(Protocol):
    """Renders one answer as it is produced."""

    async def progress(self, label: str) -> None:
        """Show that work is under way ("Searching your notes…", typing...)."""
        ...

    async def delta(self, text: str) -> None:
        """Show more of the answer."""
        ...

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Deliver the final answer; return the receipt."""
        ...


@runtime_checkable
class StreamingAdapter(Protocol):
    """An adapter that can show an answer while it streams."""

    def open_stream(self, address: Address, reply_to: str | None) -> ReplyStream:
        """Start rendering an answer to ``address``."""
        ...


@runtime_checkable
class TopicAdapter(Protocol):
    """An adapter whose chats can hold topics (Telegram forum topics): ``/new`` opens one."""

    async def open_topic(self, address: Address, title: str) -> Address:
        """Open a topic named ``title`` in the chat of ``address``; the topic's address.

        Raises a ChannelError when the chat cannot have topics (the caller starts afresh in
        place instead).
        """
        ...
