"""A pendant simulator: streams a WAV file over the device protocol and collects the answers.

Used by ``lifebot device-sim`` (to try a setup), by the tests and by the benchmark.
"""

from __future__ import annotations

import asyncio
import json
import time
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bot.device import protocol as p

DEFAULT_URL = "ws://127.0.0.1:8765/v1/device"


@dataclass(slots=True)
class WavAudio:
    """A WAV file's PCM and format."""

    pcm: bytes
    rate: int
    channels: int

    @property
    def seconds(self) -> float:
        """Its length."""
        return len(self.pcm) / (2 * self.channels * self.rate)


def read_wav(path: Path) -> WavAudio:
    """Read a 16-bit PCM WAV; ValueError in plain words for anything else."""
    try:
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() != 2:
                raise ValueError(f"{path.name} is not 16-bit PCM; convert it with sox first")
            return WavAudio(w.readframes(w.getnframes()), w.getframerate(), w.getnchannels())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"{path.name} is not a WAV file: {exc}") from exc


@dataclass(slots=True)
class SimResult:
    """Everything the server sent back, in order, with arrival times."""

    frames: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None
    close_reason: str = ""
    audio_done_at: float = 0.0
    """``time.monotonic()`` when the last audio frame was sent."""
    speech: bytes = b""
    """Spoken answers received (binary frames after ``speech-start``), PCM16 mono."""

    def of(self, kind: str) -> list[dict[str, Any]]:
        """Frames of one type."""
        return [f for f in self.frames if f.get("type") == kind]

    @property
    def session_id(self) -> str | None:
        """The session the server opened (the last ``ready``)."""
        ready = self.of("ready")
        return str(ready[-1]["session_id"]) if ready else None

    @property
    def transcripts(self) -> list[str]:
        """Final transcripts, in order."""
        return [str(f["text"]) for f in self.of("transcript") if f.get("final")]

    @property
    def replies(self) -> list[str]:
        """Whole replies, in order."""
        return [str(f["text"]) for f in self.of("reply")]


class _Collector:
    """Receives frames and knows when every announced utterance has been answered."""

    def __init__(self, mode: str, printer: Callable[[dict[str, Any]], None] | None) -> None:
        self.mode = mode
        self.printer = printer
        self.result = SimResult()
        self.announced: set[str] = set()
        self.finals: set[str] = set()
        self.questions = 0
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.pong = asyncio.Event()
        self.closed = asyncio.Event()
        """Set when the connection has ended (either side, or the network)."""

    async def either(self, event: asyncio.Event) -> bool:
        """Wait for ``event`` or the end of the connection; whether ``event`` came.

        A server that dies mid-conversation must be reported at once, not after a timeout.
        """
        waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(self.closed.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return event.is_set()

    def add(self, frame: dict[str, Any]) -> None:
        frame["_at"] = time.monotonic()
        self.result.frames.append(frame)
        if self.printer is not None:
            self.printer(frame)
        kind = frame.get("type")
        if kind == "ready":
            self.ready.set()
        elif kind == "pong":
            self.pong.set()
        elif kind == "transcript":
            seg = str(frame.get("segment_id"))
            self.announced.add(seg)
            if frame.get("final"):
                self.finals.add(seg)
                if frame.get("question"):
                    self.questions += 1
        self.changed.set()

    @property
    def settled(self) -> bool:
        answered = len(self.result.of("reply")) >= self.questions
        return self.announced <= self.finals and answered


async def _receive(ws: ClientConnection, col: _Collector) -> None:
    try:
        async for raw in ws:
            if isinstance(raw, str):
                col.add(p.Frame.from_wire(raw))
            else:
                col.result.speech += raw
    except ConnectionClosed:
        pass
    finally:
        col.result.close_code = ws.close_code
        col.result.close_reason = ws.close_reason or ""
        col.closed.set()
        col.changed.set()


async def simulate(
    wav: Path,
    *,
    token: str,
    url: str = DEFAULT_URL,
    mode: str = "ask",
    realtime: bool = False,
    chunk_ms: int = 100,
    tail_seconds: float = 1.0,
    push_to_talk: bool = False,
    session_id: str | None = None,
    wait_seconds: float = 60.0,
    printer: Callable[[dict[str, Any]], None] | None = None,
    speak: bool = False,
) -> SimResult:
    """Stream ``wav`` then wait until every utterance is transcribed (and answered in ask)."""
    audio = read_wav(wav)
    col = _Collector(mode, printer)
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(
        url, additional_headers=headers, proxy=None, compression=None, open_timeout=10
    ) as ws:
        receiver = asyncio.create_task(_receive(ws, col))
        try:
            async with asyncio.timeout(wait_seconds):
                await _stream(
                    ws,
                    col,
                    audio,
                    mode,
                    realtime,
                    chunk_ms,
                    tail_seconds,
                    push_to_talk,
                    session_id,
                    speak,
                )
                while not col.settled and col.result.close_code is None:
                    col.changed.clear()
                    await col.changed.wait()
        except TimeoutError:
            pass
        finally:
            await ws.close()
            await receiver
    return col.result


async def _stream(
    ws: ClientConnection,
    col: _Collector,
    audio: WavAudio,
    mode: str,
    realtime: bool,
    chunk_ms: int,
    tail_seconds: float,
    push_to_talk: bool,
    session_id: str | None,
    speak: bool = False,
) -> None:
    hello: dict[str, Any] = {
        "type": "hello",
        "codec": "pcm16",
        "sample_rate": audio.rate,
        "channels": audio.channels,
        "mode": mode,
        "language": "en",
    }
    if session_id:
        hello["session_id"] = session_id
    if speak:
        hello["speak"] = True
    await ws.send(json.dumps(hello))
    if not await asyncio.wait_for(col.either(col.ready), 10):
        return  # the server went away before it was ready: the caller reports how
    step = max(2 * audio.channels, int(audio.rate * chunk_ms / 1000) * 2 * audio.channels)
    silence = bytes(int(audio.rate * tail_seconds) * 2 * audio.channels)
    if push_to_talk:
        await ws.send(json.dumps({"type": "audio-start"}))
    start = time.monotonic()
    pcm = audio.pcm + (b"" if push_to_talk else silence)
    for n, i in enumerate(range(0, len(pcm), step)):
        await ws.send(pcm[i : i + step])
        if realtime:
            # Pace by the clock, not by sleeps, so send time does not accumulate as drift.
            due = start + (n + 1) * chunk_ms / 1000
            await asyncio.sleep(max(0.0, due - time.monotonic()))
    col.result.audio_done_at = time.monotonic()
    if push_to_talk:
        await ws.send(json.dumps({"type": "audio-stop"}))
    # Frames are handled in order: the pong proves every utterance has been announced.
    await ws.send(json.dumps({"type": "ping"}))
    await col.either(col.pong)


def describe(frame: dict[str, Any]) -> str:
    """One readable line per server frame (for the CLI)."""
    kind = frame.get("type")
    span = f"{frame.get('start')}-{frame.get('end')} s"
    lines = {
        "reply": f"reply: {frame.get('text')}",
        "ready": f"ready: session {frame.get('session_id')}"
        + (" (resumed)" if frame.get("resumed") else ""),
        "error": f"error {frame.get('code')}: {frame.get('message')}",
        "vad": f"vad: {frame.get('state')}",
    }
    if kind == "transcript":
        if not frame.get("final"):
            return f"... heard speech at {span}, transcribing"
        return f"transcript [{span}]: {frame.get('text')}"
    if isinstance(kind, str) and kind in lines:
        return lines[kind]
    return json.dumps({k: v for k, v in frame.items() if not k.startswith("_")})
