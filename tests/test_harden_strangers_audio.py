"""Hardening (#18) item 3: strangers get no speech-to-text, and no one can starve the owner.

Real python-telegram-bot and slack-bolt against the loopback fakes, real espeak-ng speech and
the real faster-whisper model.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from sqlmodel import select

from bot.speech.fair import FairTranscriber
from storage.models import PairingRequest
from tests.fakes.llm import FakeLLM, say
from tests.fakes.slack_api import FakeSlack, dm_event
from tests.fakes.telegram_api import FakeTelegram
from tests.support.app import AppFactory
from tests.support.slack import answer, ogg_clip, start_voice
from tests.support.speech import concat_wavs, shared_transcriber, speak
from tests.support.telegram import Starter, voice_note

STRANGER = 777


async def test_a_strangers_telegram_voice_note_is_never_downloaded(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await telegram()
    note = voice_note("Transcribe this for free please.", tmp_path)

    await tg.send_voice(STRANGER, note, duration=3)

    [reply] = await tg.wait_texts(STRANGER, 1, within=30)
    assert "pairing code" in reply
    assert tg.calls_to("getFile") == []  # nothing fetched, so nothing transcribed
    assert fake_llm.requests == []
    async with app.db.session() as s:
        assert len((await s.exec(select(PairingRequest))).all()) == 1


async def test_a_strangers_slack_audio_file_is_never_downloaded(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack, tmp_path: Path
) -> None:
    slack = await start_voice(app_factory, fake_llm, fake_slack)
    try:
        fake_slack.users["U0EVE"] = "Eve"
        clip = ogg_clip("Transcribe this for free please", tmp_path)
        file = fake_slack.add_file(clip, "audio_message.ogg", "audio/ogg", subtype="slack_audio")
        answer(fake_llm, say("SHOULD NOT ANSWER"))

        await slack.post(
            dm_event("", user="U0EVE", channel="D0EVE", subtype="file_share", files=[file])
        )

        assert fake_slack.file_downloads == []
        [reply] = fake_slack.texts("D0EVE")
        assert "pairing code" in reply
    finally:
        await slack.adapter.stop()


@pytest.mark.slow
async def test_a_long_note_in_flight_does_not_block_another_users_short_one(
    tmp_path: Path,
) -> None:
    sentence = speak(
        "The quarterly report covers revenue, costs and the plans for the next season.",
        tmp_path / "s.wav",
    )
    long_note = concat_wavs(tmp_path / "long.wav", *[sentence] * 12, gap=0.4)
    short_note = speak("Buy milk tomorrow.", tmp_path / "short.wav")
    fair = FairTranscriber(shared_transcriber(), piece_seconds=8.0)

    long_task = asyncio.create_task(fair.for_user("slack:U0BOB").transcribe_file(long_note))
    await asyncio.sleep(0.3)  # the long note's first piece is running
    start = time.monotonic()
    short = await fair.for_user("telegram:555").transcribe_file(short_note)
    owner_wait = time.monotonic() - start
    long_text = (await long_task).text
    long_total = time.monotonic() - start

    assert "milk" in short.text.lower()
    assert long_text.lower().count("quarterly") >= 10  # nothing of the long one was lost
    print(f"owner's short note: {owner_wait:.2f}s while a long note took {long_total:.2f}s")
    assert owner_wait < long_total / 2
