"""FasterWhisperTranscriber on real speech made by espeak-ng (the bundled tiny.en model)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from bot.app.options import transcriber_for
from bot.config import Settings
from bot.errors import TranscriptionError
from bot.speech.transcribe import FasterWhisperTranscriber, resolve_model
from tests.support.speech import read_wav, shared_transcriber, speak


async def test_a_spoken_question_becomes_text(tmp_path: Path) -> None:
    clip = speak("What is on my calendar tomorrow morning", tmp_path / "q.wav")
    transcript = await shared_transcriber().transcribe_file(clip)
    words = transcript.text.lower()
    assert "calendar" in words
    assert "tomorrow" in words
    assert transcript.language == "en"
    assert transcript.segments
    assert transcript.duration == pytest.approx(2.2, abs=0.6)


async def test_pcm_samples_are_transcribed_off_the_event_loop(tmp_path: Path) -> None:
    data, rate = read_wav(speak("Remind me to water the plants", tmp_path / "p.wav"))
    assert rate == 16000
    samples = data.astype(np.float32) / 32768.0
    loop_thread = threading.get_ident()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    # If inference ran on the loop, the ticker could not tick while it ran.
    task = asyncio.create_task(ticker())
    try:
        transcript = await shared_transcriber().transcribe_pcm(samples)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert "remind me" in transcript.text.lower()
    assert ticks > 3
    assert threading.get_ident() == loop_thread


async def test_empty_audio_gives_empty_text() -> None:
    transcript = await shared_transcriber().transcribe_pcm(np.zeros(0, dtype=np.float32))
    assert transcript.text == ""


async def test_an_unreadable_file_is_a_plain_error(tmp_path: Path) -> None:
    bad = tmp_path / "note.ogg"
    bad.write_bytes(b"this is not audio")
    with pytest.raises(TranscriptionError, match=r"could not decode note\.ogg"):
        await shared_transcriber().transcribe_file(bad)
    with pytest.raises(TranscriptionError, match="no audio file"):
        await shared_transcriber().transcribe_file(tmp_path / "missing.ogg")


def test_tiny_en_resolves_to_the_bundled_model_and_paths_are_used_as_is(tmp_path: Path) -> None:
    bundled = Path(resolve_model("tiny.en"))
    assert (bundled / "model.bin").is_file()
    assert resolve_model(str(bundled)) == str(bundled)
    with pytest.raises(TranscriptionError, match="no such folder"):
        resolve_model(str(tmp_path / "nowhere"))


async def test_a_missing_model_says_how_to_fix_it_and_never_downloads() -> None:
    transcriber = FasterWhisperTranscriber("large-v3")
    with pytest.raises(TranscriptionError, match="LIFEBOT_STT_MODEL"):
        await transcriber.transcribe_pcm(np.zeros(1600, dtype=np.float32))
    assert not transcriber.loaded


def test_settings_choose_the_model(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        stt_model=str(tmp_path),
        stt_compute_type="int8_float32",
        stt_threads=3,
    )
    transcriber = transcriber_for(settings)
    assert transcriber.model_name == str(tmp_path)
    assert transcriber.compute_type == "int8_float32"
    assert transcriber.cpu_threads == 3
    assert transcriber.device == "cpu"
