"""An in-memory fake of our own Transcriber port: the real model behind a gate.

Holding the gate shut makes the transcriber as slow as a test needs, without sleeps.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bot.speech.transcribe import Transcriber, Transcript


class GatedTranscriber:
    """Waits for ``gate`` before each transcription, then asks the real one."""

    def __init__(self, real: Transcriber) -> None:
        self.real = real
        self.gate = asyncio.Event()
        self.started = 0
        self.done = 0

    async def transcribe_pcm(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript:
        """Transcribe once the gate is open."""
        self.started += 1
        await self.gate.wait()
        out = await self.real.transcribe_pcm(samples, language=language, lead=lead)
        self.done += 1
        return out

    async def transcribe_file(self, path: Path, *, language: str | None = None) -> Transcript:
        """Transcribe a file once the gate is open."""
        await self.gate.wait()
        return await self.real.transcribe_file(path, language=language)

    @property
    def idle(self) -> bool:
        """Never: tests count transcriptions, so nothing optional is started early."""
        return False

    async def speculate(
        self, samples: npt.NDArray[np.float32], *, language: str | None = None, lead: int = 0
    ) -> Transcript | None:
        """Never started (the fake is never idle)."""
        return None

    async def warm_up(self) -> None:
        """Load the real model (the gate holds transcriptions only)."""
        await self.real.warm_up()
