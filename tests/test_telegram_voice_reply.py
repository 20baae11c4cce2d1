"""Answers as Telegram voice notes (issue 23): /voice off | inbound | always, OGG/Opus made
offline with espeak-ng and PyAV, checked by the loopback Telegram and heard back by the model."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import av
import numpy as np

from tests.fakes.llm import FakeLLM, Step, say
from tests.fakes.telegram_api import FakeTelegram
from tests.support.speech import shared_transcriber
from tests.support.telegram import CHAT, Starter, voice_note

# Not a claim about the user's life: the check before answering (issue 19) would want a source.
ANSWER = "Paris is the capital of France."


def _answer(llm: FakeLLM) -> None:
    def respond(body: dict[str, Any]) -> Step:
        if "Classify the user's message" in str(body["messages"][0]["content"]):
            return say('{"route": "chat"}')
        return say(ANSWER)

    llm.default = respond


async def _heard(ogg: bytes) -> str:
    """What the speech model hears in a voice note."""
    resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
    pieces = []
    with av.open(io.BytesIO(ogg), "r") as src:
        for frame in [*src.decode(audio=0), None]:
            pieces += [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
    pcm = np.concatenate(pieces).astype(np.float32) / 32768.0
    return (await shared_transcriber().transcribe_pcm(pcm, language="en")).text.lower()


async def test_inbound_answers_a_voice_note_with_a_voice_note_and_text_with_text(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    _answer(fake_llm)
    await telegram(tts_engine="espeak-ng")
    await tg.send_text(CHAT, "/voice inbound")
    [confirm] = await tg.wait_texts(CHAT, 1, within=30)
    assert "voice note" in confirm

    await tg.send_voice(CHAT, voice_note("When is my dentist appointment?", tmp_path), duration=3)
    for _ in range(1200):  # the voice note follows the finished text
        if tg.voices.get(CHAT):
            break
        await _sleep()
    assert tg.texts(CHAT)[-1] == ANSWER
    [voice] = tg.voices[CHAT]
    heard = await _heard(voice.data)
    assert "paris" in heard and "france" in heard

    before = len(tg.texts(CHAT))
    await tg.send_text(CHAT, "And when is my dentist appointment?")
    await tg.wait_texts(CHAT, before + 1, within=60)
    assert tg.texts(CHAT)[-1] == ANSWER
    await _turn_over(tg, before + 1)
    assert len(tg.voices[CHAT]) == 1  # a typed question gets text only


async def test_off_is_the_default_and_never_sends_voice(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    _answer(fake_llm)
    await telegram(tts_engine="espeak-ng")
    await tg.send_voice(CHAT, voice_note("When is my dentist appointment?", tmp_path), duration=3)
    await tg.wait_texts(CHAT, 2, within=60)
    assert tg.texts(CHAT)[-1] == ANSWER
    await _turn_over(tg, 2)
    assert tg.voices.get(CHAT, []) == []


async def _turn_over(tg: FakeTelegram, texts: int) -> None:
    """Wait until the turn that sent the last of ``texts`` texts is over, voice note and all.

    A voice note is sent after its text, inside the turn, and one chat's turns take its
    conversation lock in order: once the answer to one more message is in, the turn before
    it has sent everything it was going to.
    """
    await tg.send_text(CHAT, "Thanks.")
    await tg.wait_texts(CHAT, texts + 1, within=60)


async def _sleep(seconds: float = 0.05) -> None:
    await asyncio.sleep(seconds)
