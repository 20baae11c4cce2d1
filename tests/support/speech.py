"""Test speech made with espeak-ng, and one shared speech model for the whole test run.

Loading the model costs about a second, so every device test shares one transcriber.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bot.speech.transcribe import FasterWhisperTranscriber


def speak(text: str, path: Path, *, rate: int = 16000, voice: str = "en-us") -> Path:
    """Write ``text`` spoken by espeak-ng to a mono 16-bit WAV at ``rate`` Hz."""
    espeak = shutil.which("espeak-ng")
    sox = shutil.which("sox")
    assert espeak and sox, "espeak-ng and sox must be installed (.ci/run installs them)"
    raw = path.with_suffix(".espeak.wav")
    subprocess.run([espeak, "-v", voice, "-w", str(raw), text], check=True)
    subprocess.run([sox, str(raw), "-r", str(rate), "-c", "1", "-b", "16", str(path)], check=True)
    raw.unlink()
    return path


def silence_wav(seconds: float, path: Path, rate: int = 16000) -> Path:
    """A WAV of digital silence."""
    write_wav(path, np.zeros(int(seconds * rate), dtype=np.int16), rate)
    return path


def read_wav(path: Path) -> tuple[npt.NDArray[np.int16], int]:
    """Samples (int16, mono) and rate of a WAV file."""
    with wave.open(str(path), "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return data, w.getframerate()


def write_wav(path: Path, samples: npt.NDArray[np.int16], rate: int = 16000) -> Path:
    """Write mono int16 samples to a WAV file."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())
    return path


def concat_wavs(path: Path, *parts: Path, gap: float = 0.0) -> Path:
    """Join WAVs (same rate) with ``gap`` seconds of silence between and after them."""
    chunks = []
    rate = 16000
    for part in parts:
        data, rate = read_wav(part)
        chunks += [data, np.zeros(int(gap * rate), dtype=np.int16)]
    return write_wav(path, np.concatenate(chunks), rate)


@functools.cache
def shared_transcriber() -> FasterWhisperTranscriber:
    """The bundled tiny.en model, loaded once per test run."""
    transcriber = FasterWhisperTranscriber("tiny.en", cpu_threads=2)
    transcriber.load()
    return transcriber


def to_stereo(mono: Path, path: Path) -> Path:
    """The same sound on two channels (interleaved 16-bit)."""
    data, rate = read_wav(mono)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(data, 2).astype("<i2").tobytes())
    return path
