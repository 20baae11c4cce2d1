"""The pendant as a channel: ChannelAdapter + StreamingAdapter over the device hub.

Replies go to the device's live connection as ``reply-delta`` frames while the answer streams
and one ``reply`` frame at the end. Pushes (reminders, briefings) arrive as ``reply`` frames
with their kind.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import asdict
from typing import Any

from bot.adapters.base import MessageHandler
from bot.device import protocol as p
from bot.device.choices import spoken_prompt
from bot.device.hub import DeviceHub
from bot.device.server import DeviceServer
from bot.errors import Away
from bot.messages import Address, OutboundMessage, Receipt
from storage.repos.devices import DEVICE_CHANNEL

log = logging.getLogger(__name__)

_receipts = itertools.count(1)


def _citations(msg: OutboundMessage) -> list[dict[str, Any]]:
    return [asdict(c) for c in msg.citations]


class DeviceAdapter:
    """The ``device`` channel."""

    name = DEVICE_CHANNEL

    def __init__(self, hub: DeviceHub, host: str, port: int) -> None:
        self.hub = hub
        self.server = DeviceServer(hub, host, port)

    async def start(self, on_message: MessageHandler) -> None:
        """Queue unprocessed spooled audio first, then accept devices."""
        self.hub.on_message = on_message
        await self.hub.recover()
        await self.server.start()

    async def stop(self) -> None:
        """Close connections, let work in progress finish briefly, then stop the pipelines.

        Whatever is still queued after the grace period stays spooled and pending: the next
        start transcribes and delivers it.
        """
        await self.server.stop()
        if not await self.hub.drain(self.hub.options.stop_grace_seconds):
            log.info("stopping with utterances still queued; they resume at the next start")
        await self.hub.stop()

    def holds(self, address: Address) -> bool:
        """True when the device at ``address`` is connected to this process."""
        return address.chat_id in self.hub.connections

    async def send_frame(self, address: Address, frame: p.Frame) -> None:
        """Send one frame to the device this address names; ChannelError when it is away."""
        conn = self.hub.connections.get(address.chat_id)
        if conn is None:
            raise Away(f"device {address.chat_id} is not connected here")
        await conn.send(frame)

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Send a whole message as a ``reply`` frame; its buttons are offered in words."""
        text = msg.text
        buttons = [{"label": b.label, "data": b.data} for b in msg.buttons]
        if msg.buttons:
            text = f"{text} {spoken_prompt(msg.buttons)}"
        frame = p.Reply(text, _citations(msg), kind=msg.kind, buttons=buttons)
        await self.send_frame(msg.address, frame)
        if msg.buttons:
            # Only once the device has the question may its next utterance answer it.
            self.hub.choices.offer(msg.address.chat_id, msg.buttons)
        return Receipt(self.name, f"d{next(_receipts)}", msg.address.chat_id)

    def open_stream(self, address: Address, reply_to: str | None) -> DeviceReplyStream:
        """Stream an answer to the device."""
        return DeviceReplyStream(self, address)


class DeviceReplyStream:
    """``reply-delta`` frames while the answer grows, then one ``reply``."""

    def __init__(self, adapter: DeviceAdapter, address: Address) -> None:
        self.adapter = adapter
        self.address = address

    async def progress(self, label: str) -> None:
        """The protocol has no progress frame; a pendant just waits for the deltas."""

    async def delta(self, text: str) -> None:
        """Send more of the answer."""
        if text:
            await self.adapter.send_frame(self.address, p.ReplyDelta(text))

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Send the whole answer with its citations."""
        return await self.adapter.send(msg)
