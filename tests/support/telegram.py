"""Helpers for tests of the Telegram channel (its fixtures live in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av

CHAT = 555
"""In a private chat Telegram's chat id is the user's id."""

Starter = Callable[..., Any]
"""Starts lifebot with the Telegram channel (the ``telegram`` fixture)."""


async def eventually(check: Callable[[], Any], within: float = 30.0) -> None:
    """Wait until the async ``check()`` returns true (for effects outside the fake server)."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110  (the effect is in the database: poll it)
            await asyncio.sleep(0.02)


def voice_note(text: str, tmp_path: Path) -> bytes:
    """``text`` spoken by espeak-ng, encoded like a Telegram voice note (OGG/Opus, 48 kHz)."""
    espeak = shutil.which("espeak-ng")
    assert espeak, "espeak-ng must be installed (.ci/run installs it)"
    wav, ogg = tmp_path / "speech.wav", tmp_path / "voice.ogg"
    subprocess.run([espeak, "-v", "en-us", "-w", str(wav), text], check=True)
    resampler = av.AudioResampler(format="s16", layout="mono", rate=48000)
    with av.open(str(wav)) as src, av.open(str(ogg), "w", format="ogg") as dst:
        stream = dst.add_stream("libopus", rate=48000)
        for frame in [*src.decode(audio=0), None]:
            for chunk in resampler.resample(frame):
                dst.mux(stream.encode(chunk))
        dst.mux(stream.encode(None))
    return ogg.read_bytes()
