"""Served against direct transcription: the same espeak-ng clips, through a pendant and alone.

The pendant streams every clip in ambient mode, half a second of silence before it and a
second and a half after (so VAD cuts each one), and the final transcripts are matched to the
clips by time. The direct transcript is the clip alone through the same model. Sentences
with a pause inside are cut in two by VAD: the served words of both halves count for the clip.
Used by ``tests/test_stt_served_wer.py`` and ``bench.device``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from websockets.asyncio.client import connect

from bot.speech.transcribe import FasterWhisperTranscriber
from tests.support.speech import read_wav, speak

SENTENCES = [
    "What is on my calendar tomorrow morning",
    "Remember to buy bread and milk",
    "Pick up the laundry after work",
    "Book a table for dinner on Friday",
    "Add a meeting with Anna on Tuesday",
    "Send the report to the team before lunch",
    "Call the dentist to move my appointment",
    "How many steps did I walk yesterday",
    "Add eggs and butter to the shopping list",
    "When is my sister's birthday",
]
"""Plain sentences (the same as ``bench.wer``)."""
PAUSED = [
    ("Remember to buy bread", "and milk on the way home"),
    ("Call the dentist", "to move my appointment to Friday"),
    ("Add a meeting with Anna", "on Tuesday at ten"),
    ("Send the report to the team", "before lunch tomorrow"),
]
"""Sentences spoken in two parts with a pause longer than VAD's silence between them."""
UNPAUSED = [s for s in SENTENCES if not any(f"{a} {b}".startswith(s) for a, b in PAUSED)]
"""The plain sentences a paused one does not say again, with more words after its pause."""
PAUSE_MS = 700
LEAD = 8000
"""Samples of silence before each clip."""
TAIL = 24000
"""Samples of silence after each clip."""


@dataclass(frozen=True, slots=True)
class Clip:
    """One test clip and what it says."""

    text: str
    pcm: npt.NDArray[np.int16]


def clips(tmp: Path, sentences: list[str] = SENTENCES) -> list[Clip]:
    """The plain ``sentences`` and the paused ones as 16 kHz clips."""
    out = [Clip(s, read_wav(speak(s, tmp / f"s{i}.wav"))[0]) for i, s in enumerate(sentences)]
    gap = np.zeros(16 * PAUSE_MS, dtype=np.int16)
    for i, (a, b) in enumerate(PAUSED):
        first = read_wav(speak(a, tmp / f"pa{i}.wav"))[0]
        second = read_wav(speak(b, tmp / f"pb{i}.wav"))[0]
        out.append(Clip(f"{a} {b}", np.concatenate([first, gap, second])))
    return out


def direct(stt: FasterWhisperTranscriber, clip: Clip) -> str:
    """The clip alone through the model (blocking)."""
    return stt.transcribe_pcm_sync(clip.pcm.astype(np.float32) / 32768.0, "en").text


async def served(
    url: str, token: str, all_clips: list[Clip], *, pace: float = 0.0
) -> list[list[str]]:
    """Stream the clips through a pendant in ambient mode; the finals matched to each clip.

    ``pace``: seconds between 40 ms frames (0.04 is real time, 0 as fast as possible).
    """
    bounds: list[tuple[int, int]] = []
    parts: list[npt.NDArray[np.int16]] = []
    pos = 0
    for clip in all_clips:
        bounds.append((pos + LEAD, pos + LEAD + clip.pcm.size))
        parts += [np.zeros(LEAD, np.int16), clip.pcm, np.zeros(TAIL, np.int16)]
        pos += LEAD + clip.pcm.size + TAIL
    stream = np.concatenate(parts)
    finals: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url, additional_headers=headers, proxy=None) as ws:
        await ws.send(json.dumps({"type": "hello", "mode": "ambient", "language": "en"}))
        assert json.loads(await ws.recv())["type"] == "ready"

        async def receive() -> None:
            async for raw in ws:
                frame = json.loads(raw)
                if frame["type"] == "transcript" and frame["final"]:
                    finals.append(frame)
                    if frame["end"] * 16000 >= bounds[-1][1] - 8000:  # the last clip's end
                        return

        receiver = asyncio.create_task(receive())
        for i in range(0, stream.size, 640):
            await ws.send(stream[i : i + 640].astype("<i2").tobytes())
            await asyncio.sleep(pace)
        async with asyncio.timeout(300):
            await receiver
    out: list[list[str]] = [[] for _ in all_clips]
    for frame in finals:
        start, end = int(frame["start"] * 16000), int(frame["end"] * 16000)
        best = max(
            range(len(bounds)), key=lambda k: min(end, bounds[k][1]) - max(start, bounds[k][0])
        )
        if frame["text"]:
            out[best].append(frame["text"])
    return out
