"""The Omi feeder: chunks from the inbox become session audio, as if a pendant streamed them.

One stream per Omi device: a session (resumed like a pendant's), a resampler for the rate Omi
named, and the time of the last chunk. Chunks arrive N+1 seconds apart and are cut anywhere, so
the VAD simply continues across them. Omi never sends what is left in its buffer when the phone
disconnects, so an utterance still open when chunks stop is closed on a timeout (at least
``idle_seconds``, and longer when the device's chunks come further apart).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime

from bot.device import protocol as p
from bot.device.audio import Decoder, Int16
from bot.device.hub import DeviceHub
from bot.device.omi import Chunk, OmiInbox
from bot.device.options import DeviceInfo
from bot.device.session import SessionPipeline
from bot.errors import Away

log = logging.getLogger(__name__)

SWEEP_EVERY = 600.0
"""Seconds between clean-ups of old tombstones."""
GAP_FACTOR = 2.5
"""An utterance closes after this many of the device's usual chunk intervals without one."""


class OmiLink:
    """An Omi device as the hub's connection: nothing can be sent back through the webhook."""

    def __init__(self, device: DeviceInfo) -> None:
        self.device = device
        self.speak = False
        """Omi has no way back: nothing is spoken to it."""

    async def send(self, frame: p.Frame) -> None:
        """Omi ignores the webhook's answer: frames have nowhere to go."""
        raise Away(f"{self.device.name} is an Omi device: it cannot receive frames")

    async def send_audio(self, data: bytes) -> None:
        """Omi ignores the webhook's answer: audio has nowhere to go."""
        raise Away(f"{self.device.name} is an Omi device: it cannot play audio")

    async def close(self, code: int, reason: str) -> None:
        """Nothing to close: every chunk is its own request."""


@dataclass
class _Stream:
    link: OmiLink
    pipeline: SessionPipeline
    decoder: Decoder
    rate: int
    last: float
    """time.monotonic() of the latest chunk."""
    gap: float = 0.0
    """Seconds between the two latest chunks."""


class OmiFeed:
    """Moves chunks from the inbox into the device hub's session pipelines, in order."""

    def __init__(
        self,
        hub: DeviceHub,
        inbox: OmiInbox,
        *,
        idle_seconds: float = 20.0,
        poll_seconds: float = 1.0,
        mode: str = "ambient",
    ) -> None:
        self.hub = hub
        self.inbox = inbox
        self.idle_seconds = idle_seconds
        self.poll_seconds = poll_seconds
        self.mode = mode
        """Omi audio is ambient: a question starts with the wake phrase."""
        self.names: set[str] = set()
        """Devices fed through Omi by this process (their answers go to another channel)."""
        self._streams: dict[int, _Stream] = {}
        self._task: asyncio.Task[None] | None = None
        self._swept = float("-inf")

    async def start(self) -> None:
        """Settle what a crash left half-fed, then feed in the background."""
        await self.recover()
        self._task = asyncio.create_task(self._run(), name="omi-feed")

    async def stop(self) -> None:
        """Stop feeding; open utterances are cut and their audio kept."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for device_id in list(self._streams):
            await self._close(device_id)

    async def recover(self) -> int:
        """A chunk marked as being appended: done if the spool grew past its offset, else again."""
        settled = 0
        for item in await self.inbox.claimed():
            if self.hub.spool.samples(item.session_id) > item.offset:
                await self.inbox.done(item.chunk)
            else:
                await self.inbox.unclaim(item.chunk)
            settled += 1
        return settled

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.poll_seconds):
                    await self.inbox.arrived.wait()
            except TimeoutError:
                pass
            self.inbox.arrived.clear()
            try:
                await self.feed_pending()
                await self.close_idle()
                if time.monotonic() - self._swept >= SWEEP_EVERY:
                    self._swept = time.monotonic()
                    await self.inbox.sweep()
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                # The spool cannot take audio (disk full): chunks stay in the inbox for later.
                log.error(  # noqa: TRY400  (the cause is in the words; no trace)
                    "Omi audio cannot be moved into the spool (%s); run `lifebot doctor`", exc
                )
            except Exception:
                log.exception("feeding Omi audio failed; the chunks stay in the inbox")

    async def feed_pending(self) -> int:
        """Feed every waiting chunk; return how many were fed."""
        fed = 0
        for chunk in await self.inbox.pending():
            if await self._feed(chunk):
                fed += 1
        return fed

    async def _feed(self, chunk: Chunk) -> bool:
        device = await self.hub.active_device(chunk.device_id)
        if device is None:
            # Revoked after the chunk came in: nothing a revoked token sent is kept.
            log.warning("dropped Omi audio of a revoked device (id %s)", chunk.device_id)
            await self.inbox.drop(chunk)
            stream = self._streams.pop(chunk.device_id, None)
            if stream is not None:
                await self.hub.disconnect(stream.link, stream.pipeline)
            return False
        stream = self._streams.get(chunk.device_id)
        if stream is None:
            stream = await self._open(device, chunk.sample_rate)
        elif chunk.sample_rate != stream.rate:
            await self._add(stream, await asyncio.to_thread(stream.decoder.flush))
            stream.decoder = Decoder("pcm16", chunk.sample_rate, 1)
            stream.rate = chunk.sample_rate
        data = await self.inbox.read(chunk)
        claimed = await self.inbox.claim(chunk, stream.pipeline.id, stream.pipeline.spool.samples)
        try:
            pcm = await asyncio.to_thread(stream.decoder.decode, data)
            await self._add(stream, pcm, chunk.arrived_at)
        except BaseException:
            await self.inbox.unclaim(claimed)
            raise
        await self.inbox.done(claimed)
        now = time.monotonic()
        stream.gap, stream.last = now - stream.last, now
        if stream.pipeline.spool.seconds >= self.hub.options.max_session_seconds:
            stream.pipeline = await self.hub.rollover(stream.link, stream.pipeline)
        return True

    @staticmethod
    async def _add(stream: _Stream, pcm: Int16, ends_at: datetime | None = None) -> None:
        # Dated by arrival, not by feeding: a backlog fed after a restart keeps its times.
        await stream.pipeline.add_audio(pcm, ends_at)

    async def _open(self, device: DeviceInfo, rate: int) -> _Stream:
        link = OmiLink(device)
        hello = p.Hello(codec="pcm16", sample_rate=rate, mode=self.mode)
        pipeline, _ = await self.hub.open_session(link, hello)
        self.names.add(device.name)
        stream = _Stream(link, pipeline, Decoder("pcm16", rate, 1), rate, time.monotonic())
        self._streams[device.id] = stream
        log.info("Omi audio from %s: session %s", device.name, pipeline.id)
        return stream

    async def close_idle(self) -> int:
        """Close streams whose chunks stopped: the utterance in progress is cut now."""
        now, closed = time.monotonic(), 0
        for device_id, stream in list(self._streams.items()):
            limit = max(self.idle_seconds, GAP_FACTOR * stream.gap)
            if now - stream.last >= limit:
                await self._close(device_id)
                closed += 1
        return closed

    async def _close(self, device_id: int) -> None:
        stream = self._streams.pop(device_id, None)
        if stream is None:
            return
        await self._add(stream, await asyncio.to_thread(stream.decoder.flush))
        await self.hub.disconnect(stream.link, stream.pipeline)
