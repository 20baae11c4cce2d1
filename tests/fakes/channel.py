"""An in-memory channel adapter that records what lifebot sends, and can be made to fail."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from bot.adapters.base import MessageHandler
from bot.errors import ChannelError, RateLimited
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


# --- jobs (issue 7): channels for the outbox tests and the fan-out benchmark -------------------


class SimulatedCrash(BaseException):
    """Stands for the process dying: not an Exception, so no handler of ours catches it."""


class ChannelServer:
    """The far side of a fake channel: what it has accepted survives our process "restarting"."""

    def __init__(self) -> None:
        self.accepted: list[tuple[str | None, OutboundMessage, Receipt]] = []
        self._ids = itertools.count(1000)

    def accept(self, msg: OutboundMessage, key: str | None, channel: str) -> Receipt:
        receipt = Receipt(channel, str(next(self._ids)), msg.address.chat_id)
        self.accepted.append((key, msg, receipt))
        return receipt

    def by_key(self, key: str) -> Receipt | None:
        return next((r for k, _, r in self.accepted if k == key), None)

    def texts(self) -> list[str]:
        return [m.text for _, m, _ in self.accepted]


class KeyedFakeChannel(RecordingChannel):
    """A channel that tags pushes with an idempotency key and can be asked about them later.

    ``crash_after_accept``: the next send is accepted by the server, then the "process dies"
    before the receipt reaches us. ``plain``: behave like a channel that cannot be asked.
    """

    def __init__(self, name: str, server: ChannelServer) -> None:
        super().__init__(name)
        self.server = server
        self.crash_after_accept = False
        self.crash_before_accept = False
        self.lookups = 0

    async def send(self, msg: OutboundMessage) -> Receipt:
        return await self._deliver(msg, None)

    async def send_keyed(self, msg: OutboundMessage, key: str) -> Receipt:
        return await self._deliver(msg, key)

    async def _deliver(self, msg: OutboundMessage, key: str | None) -> Receipt:
        if self.fail_with is not None:
            raise self.fail_with
        if self.crash_before_accept:
            self.crash_before_accept = False
            raise SimulatedCrash
        receipt = self.server.accept(msg, key, self.name)
        self.sent.append(msg)
        if self.crash_after_accept:
            self.crash_after_accept = False
            raise SimulatedCrash
        return receipt

    async def find_sent(self, address: Address, key: str) -> Receipt | None:
        self.lookups += 1
        return self.server.by_key(key)


class PlainChannel(RecordingChannel):
    """A channel without idempotency keys (like Telegram's sendMessage) that can "crash"."""

    def __init__(self, name: str, server: ChannelServer) -> None:
        super().__init__(name)
        self.server = server
        self.crash_after_accept = False

    async def send(self, msg: OutboundMessage) -> Receipt:
        if self.fail_with is not None:
            raise self.fail_with
        receipt = self.server.accept(msg, None, self.name)
        self.sent.append(msg)
        if self.crash_after_accept:
            self.crash_after_accept = False
            raise SimulatedCrash
        return receipt


class RateLimitedChannel:
    """A channel that enforces ``rate`` messages per second like Telegram's bulk limit.

    A token bucket (burst ``rate``); a send without a token gets a 429 (RateLimited with the
    seconds until the next token) and is not delivered. Counts deliveries per idempotency key,
    so a benchmark can prove there were no duplicates and no losses.
    """

    def __init__(self, name: str = "fake", rate: float = 30.0) -> None:
        self.name = name
        self.rate = rate
        self.tokens = rate
        self.updated = time.monotonic()
        self.per_key: dict[str, int] = {}
        self.delivered = 0
        self.rejected = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._ids = itertools.count(1)

    async def start(self, on_message: MessageHandler) -> None:
        return None

    async def stop(self) -> None:
        return None

    def _take(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens < 1:
            self.rejected += 1
            raise RateLimited("429: too many requests", retry_after=(1 - self.tokens) / self.rate)
        self.tokens -= 1
        self.first_at = self.first_at or now
        self.last_at = now

    async def send(self, msg: OutboundMessage) -> Receipt:
        self._take()
        self.delivered += 1
        return Receipt(self.name, str(next(self._ids)), msg.address.chat_id)

    async def send_keyed(self, msg: OutboundMessage, key: str) -> Receipt:
        receipt = await self.send(msg)
        self.per_key[key] = self.per_key.get(key, 0) + 1
        return receipt

    async def find_sent(self, address: Address, key: str) -> Receipt | None:
        return Receipt(self.name, "known", address.chat_id) if key in self.per_key else None
