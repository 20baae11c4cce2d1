"""The ``web`` channel: the way back for messages sent from the web page (chat, uploads, API).

Dispatch answers a web message the way it answers a Telegram one: it opens a reply stream when
the channel can show one (this channel can: the chat page shows the answer as it is written),
then sends the final answer and any notices. Here every one of those goes to the request that
is waiting for that message, as events on a queue (``Listener``): the chat page's request
turns them into a streamed response, the upload routes read the final words.

A message is found by the inbound message it answers (``reply_to``); a /retry answers an
older message, so failing that, the newest request of the same person's web chat takes it.
With nobody waiting (the person closed the page, or a restart offers a message for /retry),
a send is a ``ChannelError`` as for an unreachable chat: the answer is stored all the same,
and the chat page shows it from the conversation when it is opened again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import count

from bot.adapters.base import MessageHandler
from bot.errors import ChannelError
from bot.messages import Address, OutboundMessage, Receipt

CHANNEL = "web"
"""The channel name of messages sent from the web page (and the API)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """The agent is at work ("Searching your notes…")."""

    label: str


@dataclass(frozen=True, slots=True)
class Delta:
    """More of the answer, as the model writes it."""

    text: str


@dataclass(frozen=True, slots=True)
class Said:
    """A whole message: the final answer (replacing its deltas), a command's reply, a notice."""

    message: OutboundMessage


ChannelEvent = Progress | Delta | Said
"""What a waiting request hears, in order."""


class Listener:
    """One request waiting for what dispatch says in answer to its message."""

    def __init__(self, message_id: str, chat_id: str, order: int) -> None:
        self.message_id = message_id
        """The inbound message's channel id (what replies name as ``reply_to``)."""
        self.chat_id = chat_id
        """The person's web chat (``user:<id>``)."""
        self.order = order
        """Newer requests have higher numbers (a /retry's answer goes to the newest)."""
        self.events: asyncio.Queue[ChannelEvent] = asyncio.Queue()
        """Everything heard, in order (read by a streaming request; others may ignore it)."""
        self.said: list[OutboundMessage] = []
        """The whole messages heard, in order."""

    def hear(self, event: ChannelEvent) -> None:
        """Queue one event (and keep whole messages)."""
        if isinstance(event, Said):
            self.said.append(event.message)
        self.events.put_nowait(event)


class WebStream:
    """The ``ReplyStream`` of one web answer: progress and deltas go to the waiting request."""

    def __init__(self, channel: WebChannel, address: Address, reply_to: str | None) -> None:
        self.channel = channel
        self.address = address
        self.reply_to = reply_to

    async def progress(self, label: str) -> None:
        """Show what the agent is doing."""
        self._hear(Progress(label))

    async def delta(self, text: str) -> None:
        """Show more of the answer."""
        self._hear(Delta(text))

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """The final answer, as a whole message."""
        return await self.channel.send(msg)

    def _hear(self, event: ChannelEvent) -> None:
        # Nobody waiting: the live view is gone, the stored answer stays (as on any channel).
        listener = self.channel.route(self.reply_to, self.address)
        if listener is not None:
            listener.hear(event)


class WebChannel:
    """Registered with dispatch as the ``web`` adapter; hands answers to waiting requests."""

    name = CHANNEL

    def __init__(self) -> None:
        self._waiting: dict[str, Listener] = {}
        self._order = count()

    async def start(self, on_message: MessageHandler) -> None:
        """Nothing to start: the page hands its messages to dispatch itself."""

    async def stop(self) -> None:
        """Nothing to stop."""

    def open_stream(self, address: Address, reply_to: str | None) -> WebStream:
        """Stream an answer to the request waiting for ``reply_to``."""
        return WebStream(self, address, reply_to)

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Hand ``msg`` to the request waiting for it (ChannelError with nobody waiting)."""
        listener = self.route(msg.reply_to, msg.address)
        if listener is None:
            raise ChannelError("nobody is waiting on the web page for this message")
        listener.hear(Said(msg))
        return Receipt(CHANNEL, f"{listener.message_id}:{len(listener.said)}", msg.address.chat_id)

    def route(self, reply_to: str | None, address: Address) -> Listener | None:
        """The request a message for ``address`` answering ``reply_to`` goes to, if any."""
        found = self._waiting.get(reply_to or "")
        if found is not None:
            return found
        # A /retry answers an older message: the newest request of that chat waits for it.
        mine = [w for w in self._waiting.values() if w.chat_id == address.chat_id]
        return max(mine, key=lambda w: w.order) if mine else None

    def listen(self, message_id: str, chat_id: str) -> Listener:
        """Start collecting what is sent in answer to ``message_id`` (``done`` ends it)."""
        listener = Listener(message_id, chat_id, next(self._order))
        self._waiting[message_id] = listener
        return listener

    def done(self, listener: Listener) -> None:
        """Stop collecting for ``listener``."""
        if self._waiting.get(listener.message_id) is listener:
            del self._waiting[listener.message_id]
