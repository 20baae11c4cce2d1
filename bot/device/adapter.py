"""The pendant as a channel: ChannelAdapter + StreamingAdapter over the device hub.

Replies go to the device's live connection as ``reply-delta`` frames while the answer streams
and one ``reply`` frame at the end. Pushes (reminders, briefings) arrive as ``reply`` frames
with their kind.

A pendant whose ``hello`` set ``speak`` also hears the answer (when speech output is on):
each sentence is synthesized as soon as the stream completes it and sent as ``speech-start``,
binary PCM16 frames, ``speech-end``, so the first words play while the rest is written; the
last piece is spoken before the ``reply`` frame, which therefore always ends an answer.

Omi devices (``omi_feed.py``) cannot be answered through Omi: a reply to one is put in the
outbox for the user's preferred linked channel instead, never back to the Omi device.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from dataclasses import asdict
from typing import Any

from bot.adapters.base import MessageHandler
from bot.device import protocol as p
from bot.device.choices import spoken_prompt
from bot.device.hub import DeviceHub
from bot.device.omi import OmiInbox
from bot.device.omi_feed import OmiFeed
from bot.device.options import Connection
from bot.device.server import DeviceServer
from bot.device.spool_cap import SpoolKeeper
from bot.errors import Away, ChannelError, SynthesisError
from bot.messages import Address, OutboundMessage, Receipt
from bot.speech.synthesize import Synthesizer, sentences, spoken_text
from storage.repos.devices import DEVICE_CHANNEL
from storage.repos.outbox import OutboxRepo, Push

log = logging.getLogger(__name__)

_receipts = itertools.count(1)


def _citations(msg: OutboundMessage) -> list[dict[str, Any]]:
    return [asdict(c) for c in msg.citations]


class DeviceAdapter:
    """The ``device`` channel."""

    name = DEVICE_CHANNEL

    def __init__(
        self,
        hub: DeviceHub,
        host: str,
        port: int,
        omi: OmiInbox | None = None,
        omi_idle_seconds: float = 20.0,
        synthesizer: Synthesizer | None = None,
        spool_cap_bytes: int = 0,
    ) -> None:
        self.hub = hub
        self.synthesizer = synthesizer
        """Speech output for pendants that ask for it (None: off)."""
        self.server = DeviceServer(hub, host, port)
        self.omi = OmiFeed(hub, omi, idle_seconds=omi_idle_seconds) if omi is not None else None
        """Feeds audio that Omi's backend posted to the web page (None: no Omi path)."""
        self.keeper = SpoolKeeper(hub, omi, spool_cap_bytes)
        """Keeps the spool under LIFEBOT_DEVICE_SPOOL_MAX_MB."""

    async def start(self, on_message: MessageHandler) -> None:
        """Queue unprocessed spooled audio first, then accept devices and Omi chunks."""
        self.hub.on_message = on_message
        await self.hub.recover()
        await self.keeper.start()
        await self.server.start()
        if self.omi is not None:
            await self.omi.start()

    async def stop(self) -> None:
        """Close connections, let work in progress finish briefly, then stop the pipelines.

        Whatever is still queued after the grace period stays spooled and pending: the next
        start transcribes and delivers it.
        """
        await self.server.stop()
        await self.keeper.stop()
        if self.omi is not None:
            await self.omi.stop()
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

    def is_omi(self, name: str) -> bool:
        """True for a device that speaks through Omi and is not connected as a pendant."""
        return self.omi is not None and name in self.omi.names and name not in self.hub.connections

    async def _heard_through_omi(self, name: str) -> bool:
        """Like ``is_omi``, also after a restart (the device has chunks in Omi's inbox)."""
        if self.is_omi(name):
            return True
        if self.omi is None or name in self.hub.connections:
            return False
        device = await self.hub.active_device_named(name)
        return device is not None and await self.omi.inbox.is_omi(device.id)

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Send a whole message as a ``reply`` frame (and speech); buttons offered in words."""
        if await self._heard_through_omi(msg.address.chat_id):
            return await self._forward(msg)
        await self.speak(msg.address, msg.text)
        return await self._reply(msg)

    async def _reply(self, msg: OutboundMessage) -> Receipt:
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

    def _speaker(self, address: Address) -> Connection | None:
        conn = self.hub.connections.get(address.chat_id)
        if self.synthesizer is None or conn is None or not conn.speak:
            return None
        return conn

    async def speak(self, address: Address, text: str) -> None:
        """Speak ``text`` to the device, sentence by sentence, if it asked for speech.

        Speech is a courtesy on top of the text frames: a failure is logged, not raised.
        """
        conn = self._speaker(address)
        if conn is None or self.synthesizer is None:
            return
        for piece in sentences(spoken_text(text)):
            try:
                speech = await self.synthesizer.synthesize(piece)
                await conn.send(p.SpeechStart(piece, speech.rate))
                raw = speech.samples.astype("<i2").tobytes()
                step = speech.rate // 10 * 2  # 100 ms per binary frame
                for i in range(0, len(raw), step):
                    await conn.send_audio(raw[i : i + step])
                await conn.send(p.SpeechEnd())
            except SynthesisError as exc:
                log.warning("could not speak to %s: %s", address.chat_id, exc)
                return
            except ChannelError:
                return  # the device left; the text frames already said why

    async def _forward(self, msg: OutboundMessage) -> Receipt:
        """An answer to a question heard through Omi: to the outbox, for another channel."""
        device = await self.hub.active_device_named(msg.address.chat_id)
        if device is None:
            raise Away(f"device {msg.address.chat_id} was revoked")
        key = f"omi-answer:{device.name}:{uuid.uuid4().hex}"
        push = Push(
            user_id=device.user_id,
            kind="notice",
            key=key,
            due_at=self.hub.clock.now(),
            text=msg.text,
            buttons=[(b.label, b.data) for b in msg.buttons],
            urgent=True,  # an answer the user is waiting for, not a notice to hold back
            extra={"not_to": [[DEVICE_CHANNEL, device.name]]},
        )
        async with self.hub.db.session() as s:
            await OutboxRepo(s).enqueue([push], self.hub.clock.now())
        log.info("the answer to %s's question goes to the user's linked channel", device.name)
        return Receipt(self.name, key, msg.address.chat_id)

    def open_stream(self, address: Address, reply_to: str | None) -> DeviceReplyStream:
        """Stream an answer to the device."""
        return DeviceReplyStream(self, address)


class DeviceReplyStream:
    """``reply-delta`` frames while the answer grows, then one ``reply``.

    Finished sentences are spoken as they complete (to a pendant that asked for speech).
    """

    def __init__(self, adapter: DeviceAdapter, address: Address) -> None:
        self.adapter = adapter
        self.address = address
        self._unspoken = ""
        """Text streamed but not yet spoken (an unfinished sentence)."""
        self._streamed = False

    async def progress(self, label: str) -> None:
        """The protocol has no progress frame; a pendant just waits for the deltas."""

    async def delta(self, text: str) -> None:
        """Send more of the answer (an Omi device gets the whole answer elsewhere)."""
        if text and not self.adapter.is_omi(self.address.chat_id):
            await self.adapter.send_frame(self.address, p.ReplyDelta(text))
            self._streamed = True
            self._unspoken += text
            pieces = sentences(self._unspoken)
            if len(pieces) > 1:
                # Every piece but the last is a finished sentence; the last may still grow.
                self._unspoken = pieces[-1]
                await self.adapter.speak(self.address, " ".join(pieces[:-1]))

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Send the whole answer with its citations; speak what was not spoken yet."""
        if not self._streamed:
            return await self.adapter.send(msg)
        if self.adapter.is_omi(self.address.chat_id):
            return await self.adapter.send(msg)
        await self.adapter.speak(self.address, self._unspoken)
        self._unspoken = ""
        return await self.adapter._reply(msg)  # the stream is part of the adapter
