"""The Transcriber port, shared by the pendant, Telegram voice notes and Slack audio files.

Implementations must never block the event loop (run the model in a worker thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt


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
