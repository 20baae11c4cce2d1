"""An in-memory channel adapter that records what lifebot sends, and can be made to fail."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from bot.adapters.base import MessageHandler
from bot.errors import ChannelError
from bot.messages import Address, OutboundMessage, Receipt


@dataclass
class RecordingStream:
    """Records progress labels and deltas of one streamed answer."""

    channel: RecordingChannel
    progress_labels: list[str] = field(default_factory=list)
    deltas: list[str] = field(default_factory=list)

    async def progress(self, label: str) -> None:
        self.progress_labels.append(label)

    async def delta(self, text: str) -> None:
        self.deltas.append(text)

    async def finish(self, msg: OutboundMessage) -> Receipt:
        return await self.channel.send(msg)


class RecordingChannel:
    """A fake channel named ``name``; ``sent`` holds every delivered message."""

    def __init__(self, name: str = "fake", *, streaming: bool = False) -> None:
        self.name = name
        self.sent: list[OutboundMessage] = []
        self.streams: list[RecordingStream] = []
        self.fail_with: ChannelError | None = None
        self._ids = itertools.count(100)
        self.on_message: MessageHandler | None = None

    async def start(self, on_message: MessageHandler) -> None:
        self.on_message = on_message

    async def send(self, msg: OutboundMessage) -> Receipt:
        if self.fail_with is not None:
            raise self.fail_with
        self.sent.append(msg)
        return Receipt(self.name, str(next(self._ids)), msg.address.chat_id)

    async def stop(self) -> None:
        return None

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.address.chat_id == chat_id]


class StreamingRecordingChannel(RecordingChannel):
    """The same, but it renders streams, like Telegram or the console."""

    def open_stream(self, address: Address, reply_to: str | None) -> RecordingStream:
        stream = RecordingStream(self)
        self.streams.append(stream)
        return stream
