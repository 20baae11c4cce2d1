"""Optional transcriptions (partials, early guesses) never hold up a final (#33).

Cancelling the asyncio task that awaits a model run does not stop the run in its thread: the
busy count must follow the thread, or "idle" lies and more optional runs queue in front of the
next final.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from bot.speech.transcribe import FasterWhisperTranscriber
from tests.support.device import eventually
from tests.support.speech import concat_wavs, read_wav, shared_transcriber, speak


def _clip(tmp_path: Path, text: str, name: str) -> np.ndarray:
    pcm, _ = read_wav(speak(text, tmp_path / f"{name}.wav"))
    return pcm.astype(np.float32) / 32768.0


async def _until_idle(stt: FasterWhisperTranscriber) -> None:
    await eventually(lambda: stt.idle, 60)


async def test_an_abandoned_partial_keeps_the_model_busy_until_its_thread_ends(
    tmp_path: Path,
) -> None:
    stt = shared_transcriber()
    await _until_idle(stt)
    parts = [
        speak(t, tmp_path / f"p{i}.wav")
        for i, t in enumerate(
            [
                "Remember to call the dentist tomorrow morning about the appointment",
                "and then buy bread and milk and eggs on the way home from work",
                "and book a table for dinner on Friday evening with Anna and Tom",
            ]
        )
    ]
    long = read_wav(concat_wavs(tmp_path / "long.wav", *parts, gap=0.3))[0]
    audio = long.astype(np.float32) / 32768.0
    short = _clip(tmp_path, "What is on my calendar tomorrow", "short")

    partial = asyncio.create_task(stt.speculate(audio, language="en"))
    await asyncio.sleep(0.05)  # the run is in its thread now
    assert not stt.idle
    partial.cancel()
    await asyncio.gather(partial, return_exceptions=True)
    # The task is gone, the model run is not: nothing optional may start behind it.
    assert not stt.idle, "the busy count followed the cancelled task, not the thread"
    assert await stt.speculate(short, language="en") is None

    # The final still gets its transcript once the abandoned run is done.
    final = await stt.transcribe_pcm(short, language="en")
    assert "calendar" in final.text.lower()
    await _until_idle(stt)


async def test_a_partial_never_starts_while_a_final_runs(tmp_path: Path) -> None:
    stt = shared_transcriber()
    await _until_idle(stt)
    clip = _clip(tmp_path, "Send the report to the team before lunch", "c")
    final = asyncio.create_task(stt.transcribe_pcm(clip, language="en"))
    await asyncio.sleep(0)  # handed to the thread
    assert await stt.speculate(clip, language="en") is None
    assert "report" in (await final).text.lower()
    await _until_idle(stt)
    guess = await stt.speculate(clip, language="en")
    assert guess is not None and "report" in guess.text.lower()
