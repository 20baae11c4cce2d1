"""A fair share of speech-to-text: one queue per person, served round-robin.

The model already uses every core, so transcriptions run one at a time. With a plain lock the
first comer wins: a five-minute voice note held everyone else's four-second note for its whole
run. Here every person (a key such as ``telegram:555``) has a queue, the queues are served in
turn, and a long recording is cut into pieces of ``piece_seconds`` (at the quietest moment near
each cut) that queue one by one. Another person's short note so waits for one piece at most.
"""

from __future__ import annotations

import asyncio
import tempfile
import wave
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bot.errors import TranscriptionError
from bot.speech.transcribe import SAMPLE_RATE, Segment, Transcriber, Transcript


class RoundRobin:
    """``slots`` turns at a time, granted to waiting keys in rotation (FIFO within a key)."""

    def __init__(self, slots: int = 1) -> None:
        self._free = slots
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._order: deque[str] = deque()

    @asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """Wait for ``key``'s turn, hold it for the block."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append(fut)
        if key not in self._order:
            self._order.append(key)
        self._grant()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted just as we were cancelled: pass the turn on
            raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        self._free += 1
        self._grant()

    def _grant(self) -> None:
        while self._free > 0 and self._order:
            key = self._order.popleft()
            queue = self._waiting[key]
            fut = queue.popleft()
            if queue:
                self._order.append(key)  # its next piece goes to the back of the line
            else:
                del self._waiting[key]
            if fut.cancelled():
                continue
            self._free -= 1
            fut.set_result(None)


class FairTranscriber:
    """Wraps one Transcriber; ``for_user(key)`` gives each person their own fair view."""

    def __init__(self, inner: Transcriber, *, piece_seconds: float = 30.0) -> None:
        self.inner = inner
        self.piece_seconds = piece_seconds
        self.turns = RoundRobin(1)

    def for_user(self, key: str) -> UserTranscriber:
        """The Transcriber port for one person's recordings."""
        return UserTranscriber(self, key)

    async def warm_up(self) -> None:
        """Load the model now."""
        await self.inner.warm_up()


class UserTranscriber:
    """One person's view of a FairTranscriber (implements the Transcriber port)."""

    def __init__(self, fair: FairTranscriber, key: str) -> None:
        self.fair = fair
        self.key = key

    async def warm_up(self) -> None:
        """Load the model now."""
        await self.fair.inner.warm_up()

    @property
    def idle(self) -> bool:
        """True when the shared model has nothing to do."""
        return self.fair.inner.idle

    async def transcribe_pcm(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript:
        """Transcribe 16 kHz mono float32 samples when this person's turn comes."""
        async with self.fair.turns.turn(self.key):
            return await self.fair.inner.transcribe_pcm(samples, language=language, lead=lead)

    async def speculate(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript | None:
        """Optional work, only while the shared model is idle (it takes no turn from anyone)."""
        return await self.fair.inner.speculate(samples, language=language, lead=lead)

    async def transcribe_file(self, path: Path, *, language: str | None = None) -> Transcript:
        """Decode, cut into pieces, transcribe each piece in turn; one joined transcript."""
        audio = await asyncio.to_thread(_decode, path)
        limit = int(self.fair.piece_seconds * SAMPLE_RATE)
        if audio.size <= limit:
            async with self.fair.turns.turn(self.key):
                return await self.fair.inner.transcribe_file(path, language=language)
        texts: list[str] = []
        segments: list[Segment] = []
        lang: str | None = None
        with tempfile.TemporaryDirectory(prefix="stt-pieces-") as tmp:
            for n, (offset, piece) in enumerate(_pieces(audio, limit)):
                piece_path = Path(tmp) / f"{n}.wav"
                await asyncio.to_thread(_write_wav, piece_path, piece)
                async with self.fair.turns.turn(self.key):
                    part = await self.fair.inner.transcribe_file(piece_path, language=language)
                lang = lang or part.language
                if part.text.strip():
                    texts.append(part.text.strip())
                start = offset / SAMPLE_RATE
                segments += [Segment(s.start + start, s.end + start, s.text) for s in part.segments]
        return Transcript(" ".join(texts), segments, lang, round(audio.size / SAMPLE_RATE, 3))


def _decode(path: Path) -> npt.NDArray[np.float32]:
    if not path.is_file():
        raise TranscriptionError(f"no audio file at {path}")
    try:
        from faster_whisper.audio import decode_audio  # noqa: PLC0415  # heavy import

        audio: npt.NDArray[np.float32] = decode_audio(str(path), sampling_rate=SAMPLE_RATE)
    except Exception as exc:  # PyAV raises its own tree (av.error.*); translate it
        raise TranscriptionError(f"could not decode {path.name}: {exc}") from exc
    return audio


def _pieces(
    audio: npt.NDArray[np.float32], limit: int
) -> list[tuple[int, npt.NDArray[np.float32]]]:
    """Cut at the quietest 50 ms in the last quarter of each piece (not inside a word)."""
    window = SAMPLE_RATE // 20
    out: list[tuple[int, npt.NDArray[np.float32]]] = []
    start = 0
    while audio.size - start > limit:
        lo, hi = start + limit * 3 // 4, start + limit
        tail = audio[lo:hi]
        frames = tail[: tail.size // window * window].reshape(-1, window)
        cut = lo + int(np.argmin(np.abs(frames).mean(axis=1))) * window + window // 2
        out.append((start, audio[start:cut]))
        start = cut
    out.append((start, audio[start:]))
    return out


def _write_wav(path: Path, samples: npt.NDArray[np.float32]) -> None:
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())
