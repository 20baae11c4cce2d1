"""Text to speech: the ``Synthesizer`` port and a local, offline engine (espeak-ng).

espeak-ng comes from Debian (``apt install espeak-ng``), needs no model download, and speaks a
sentence in a few hundredths of a second on one core; its voice is robotic but clear. Neural
engines (Piper, Kokoro) need voice models that no PyPI package ships, so none is required here.
The text goes to espeak-ng on stdin, so nothing in it is read as a command-line option.
"""

from __future__ import annotations

import asyncio
import io
import re
import shutil
import wave
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from bot.errors import SynthesisError

MAX_CHARS = 2000
"""Longer text is cut: a spoken answer is short, and this bounds the work per request."""

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


@dataclass(frozen=True, slots=True)
class Speech:
    """Synthesized audio: mono 16-bit samples at ``rate``."""

    samples: npt.NDArray[np.int16]
    rate: int
    """Samples per second (espeak-ng speaks at 22050 Hz)."""

    @property
    def seconds(self) -> float:
        """How long it plays."""
        return self.samples.size / self.rate


class Synthesizer(Protocol):
    """Turns text into speech."""

    engine: str
    """The engine's name (``espeak-ng``), for ``info`` and logs."""
    voice: str
    """The voice used."""

    async def synthesize(self, text: str) -> Speech:
        """Speak ``text``; SynthesisError when the engine is missing or fails."""
        ...


class EspeakSynthesizer:
    """espeak-ng as a subprocess (off the event loop by nature)."""

    engine = "espeak-ng"

    def __init__(self, voice: str = "en-us", words_per_minute: int = 170) -> None:
        self.voice = voice
        self.words_per_minute = words_per_minute

    async def synthesize(self, text: str) -> Speech:
        """Speak ``text`` (cut to MAX_CHARS) as 22.05 kHz mono 16-bit audio."""
        binary = shutil.which("espeak-ng")
        if binary is None:
            raise SynthesisError("speech output needs espeak-ng: apt install espeak-ng")
        proc = await asyncio.create_subprocess_exec(
            binary,
            "--stdout",
            "-v",
            self.voice,
            "-s",
            str(self.words_per_minute),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(text[:MAX_CHARS].encode())
        if proc.returncode != 0:
            raise SynthesisError(f"espeak-ng failed: {err.decode(errors='replace').strip()}")
        return _read_wav(out)


_LINK = re.compile(r"\[([^\]]+)\]\((?:[^)]+)\)")
_CITATION = re.compile(r"\s*\[\d+(?:,\s*\d+)*\]")
_URL = re.compile(r"https?://\S+")
_MARKUP = re.compile(r"[*_`#>|~]+")


def spoken_text(text: str) -> str:
    """What to say for a written answer: links by their words, no citation marks or markup."""
    text = _LINK.sub(r"\1", text)
    text = _CITATION.sub("", text)
    text = _URL.sub("a link", text)
    return re.sub(r"[ \t]+", " ", _MARKUP.sub("", text)).strip()


def sentences(text: str) -> list[str]:
    """Sentence-sized pieces of ``text``, so the first can play while the rest are made."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _read_wav(data: bytes) -> Speech:
    # espeak-ng writes a streaming WAV whose size fields may be 0 or 0xFFFFFFFF: take the
    # format from the header and every byte after it as samples.
    with wave.open(io.BytesIO(data), "rb") as w:
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
    start = data.find(b"data") + 8
    if width != 2 or channels != 1 or start < 8:
        raise SynthesisError("espeak-ng wrote audio in an unexpected format")
    body = data[start:]
    body = body[: len(body) - len(body) % 2]
    return Speech(np.frombuffer(body, dtype="<i2").astype(np.int16), rate)
