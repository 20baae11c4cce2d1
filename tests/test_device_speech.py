"""lifebot speaks back to the pendant (issue 23): espeak-ng speech as audio frames, sentence by
sentence while the answer streams, only to a pendant that asked for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.fakes.llm import FakeLLM, say
from tests.support.app import AppFactory
from tests.support.device import add_device, running_device
from tests.support.speech import shared_transcriber, speak

ANSWER = "Paris is the capital of France. Bring your insurance card."


async def test_a_spoken_reply_arrives_as_audio_frames_sentence_by_sentence(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm, tts_engine="espeak-ng")
    _, token = await add_device(app, "speaker-1")
    fake_llm.default = lambda body: say(ANSWER)
    clip = speak("What is on my calendar tomorrow morning", tmp_path / "q.wav")

    async with running_device(app) as dev:
        result = await dev.sim(clip, token, mode="ask", speak=True)

    assert result.replies == [ANSWER]
    starts = result.of("speech-start")
    assert [f["text"] for f in starts] == [
        "Paris is the capital of France.",
        "Bring your insurance card.",
    ]
    assert len(result.of("speech-end")) == 2
    # Every piece is spoken before the reply frame that ends the answer.
    assert max(f["_at"] for f in starts) <= result.of("reply")[0]["_at"]
    rate = int(starts[0]["sample_rate"])
    pcm = np.frombuffer(result.speech, dtype="<i2").astype(np.float32) / 32768.0
    assert pcm.size / rate > 2.0
    idx = np.arange(0, pcm.size, rate / 16000).astype(int)
    heard = (await shared_transcriber().transcribe_pcm(pcm[idx], language="en")).text.lower()
    assert "paris" in heard and "card" in heard


async def test_a_pendant_that_did_not_ask_for_speech_gets_text_only(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm, tts_engine="espeak-ng")
    _, token = await add_device(app, "speaker-2")
    fake_llm.default = lambda body: say(ANSWER)
    clip = speak("What is on my calendar tomorrow morning", tmp_path / "q.wav")

    async with running_device(app) as dev:
        result = await dev.sim(clip, token, mode="ask")

    assert result.replies == [ANSWER]
    assert result.of("speech-start") == [] and result.speech == b""
