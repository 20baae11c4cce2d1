"""Audio files shared in a Slack DM are transcribed (real faster-whisper) and answered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, say
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack, dm_event
from tests.support.app import AppFactory
from tests.support.slack import ANA_DM, Slack, answer, asked_of, ogg_clip, start_voice


@pytest.fixture
async def voice(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> AsyncIterator[Slack]:
    """lifebot ready for voice clips."""
    slack = await start_voice(app_factory, fake_llm, fake_slack)
    yield slack
    await slack.adapter.stop()


async def test_voice_clip_in_a_dm_is_transcribed_and_answered(
    voice: Slack, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    clip = ogg_clip("Remind me to water the plants tomorrow", tmp_path)
    file = voice.fake.add_file(clip, "audio_message.ogg", "audio/ogg", subtype="slack_audio")
    answer(fake_llm, say("I'll remind you to water the plants."))

    await voice.post(dm_event("", subtype="file_share", files=[file]))

    heard = asked_of(fake_llm)[0]["messages"][-1]["content"].lower()
    assert "water" in heard
    assert "plant" in heard
    assert voice.fake.texts(ANA_DM) == ["I'll remind you to water the plants."]
    assert voice.fake.file_downloads == [(file["id"], f"Bearer {BOT_TOKEN}")]
    spool = voice.app.settings.data_dir / "slack-audio"
    assert not any(spool.glob("*"))  # the audio is not kept once it is transcribed


async def test_typed_words_and_the_clip_are_both_heard(
    voice: Slack, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    clip = ogg_clip("Please buy some milk", tmp_path)
    file = voice.fake.add_file(clip, "note.ogg", "audio/ogg")
    answer(fake_llm, say("Noted."))

    await voice.post(dm_event("add this to my tasks:", subtype="file_share", files=[file]))

    heard = asked_of(fake_llm)[0]["messages"][-1]["content"].lower()
    assert heard.startswith("add this to my tasks:")
    assert "milk" in heard


async def test_audio_link_outside_slack_is_not_fetched_with_the_token(
    voice: Slack, fake_llm: FakeLLM
) -> None:
    file = {
        "id": "F0EVIL",
        "name": "voice.ogg",
        "mimetype": "audio/ogg",
        "size": 1000,
        "url_private_download": "https://files.example.net/steal-the-token.ogg",
    }
    answer(fake_llm, say("Sorry, I could not open that audio file."))

    await voice.post(dm_event("", subtype="file_share", files=[file]))

    assert voice.fake.file_downloads == []
    heard = asked_of(fake_llm)[-1]["messages"][-1]["content"]
    assert "voice.ogg" in heard
    assert "does not point at Slack" in heard
    assert voice.fake.texts(ANA_DM) == ["Sorry, I could not open that audio file."]


async def test_audio_over_the_size_limit_is_refused_in_plain_words(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    slack = await start_voice(app_factory, fake_llm, fake_slack, slack_max_audio_bytes=2_000_000)
    big = fake_slack.add_file(b"\0" * 2_000_001, "long.ogg", "audio/ogg")
    answer(fake_llm, say("That recording is too long for me."))

    await slack.post(dm_event("", subtype="file_share", files=[big]))

    heard = asked_of(fake_llm)[-1]["messages"][-1]["content"]
    assert "larger than the 2 MB limit" in heard
    assert fake_slack.file_downloads == []
    assert fake_slack.texts(ANA_DM) == ["That recording is too long for me."]
