"""Omi's "Realtime audio bytes" webhook end to end (issue 23): espeak-ng speech posted exactly
as Omi's backend posts it, the real model, the real spool, the outbox to a linked channel."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlmodel import col, select

from bot.app.build import App
from bot.messages import Address, OutboundMessage
from storage.models import Delivery, Message
from storage.repos.devices import DeviceRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, say
from tests.support.app import AppFactory
from tests.support.device import add_device, running_device
from tests.support.omi import omi_chunks, post_chunk
from tests.support.speech import read_wav, speak
from tests.support.web import client_for

EVERY = 5
"""The Omi app's "Every x seconds" (its default)."""


async def _ambient(app: App, user_id: int, word: str) -> list[Message]:
    async with app.db.session() as s:
        rows = await s.exec(
            select(Message).where(
                Message.user_id == user_id,
                Message.sender_id == "pendant",
                col(Message.text).contains(word),
            )
        )
        return list(rows.all())


def _layout(tmp_path: Path, rate: int) -> bytes:
    """An ambient sentence, then a question after the wake phrase that ends right at the last
    chunk's edge: no trailing silence, so only the timeout can close it."""
    told = read_wav(
        speak("The plumber will come on Thursday afternoon", tmp_path / "a.wav", rate=rate)
    )[0]
    asked = read_wav(
        speak("Hey computer, what is the weather like today", tmp_path / "q.wav", rate=rate)
    )[0]
    gap = np.zeros(int(1.5 * rate), dtype=np.int16)
    tail = np.zeros(int(0.2 * rate), dtype=np.int16)
    body = np.concatenate([told, gap, asked, tail])
    step = (EVERY + 1) * rate  # Omi sends once more than EVERY seconds are buffered
    lead = np.zeros((-body.size) % step + rate, dtype=np.int16)
    return np.concatenate([lead, body]).astype("<i2").tobytes()


async def _omi_app(app_factory: AppFactory, fake_llm: FakeLLM) -> tuple[App, RecordingChannel]:
    app = await app_factory(
        fake_llm, device_wake_phrase="hey computer", omi_idle_seconds=2.0, jobs_send_rate=0
    )
    fake = RecordingChannel("fake")
    app.dispatcher.register(fake)
    return app, fake


async def test_an_omi_stream_becomes_transcripts_and_a_question_is_answered_on_telegram_side(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app, fake = await _omi_app(app_factory, fake_llm)
    user, token = await add_device(app, "omi-1")
    assert "," not in token  # the Omi app stores "URL,seconds" in one string
    async with app.db.session() as s:
        await UserRepo(s).add_identity(user.id or 0, "fake", "acct", "ana", chat_id="ana")
    fake_llm.default = lambda body: say("Sunny and warm.")
    chunks = omi_chunks(_layout(tmp_path, 16000), 16000, EVERY)
    assert len(chunks) >= 2

    async with running_device(app), client_for(app) as web:
        for i, chunk in enumerate(chunks):
            first = await post_chunk(web, token, chunk, 16000, key=f"k{i}")
            assert first.status_code == 200 and first.json() == {"result": "stored"}
            if i == 1:
                # Omi's backend retries a chunk it got no answer for, with the same key.
                again = await post_chunk(web, token, chunk, 16000, key="k1")
                assert again.status_code == 200 and again.json() == {"result": "duplicate"}
        # The question's answer goes through the outbox to the user's linked channel.
        outbox = app.jobs.outbox

        async def answered() -> list[Delivery]:
            async with app.db.session() as s:
                rows = await s.exec(
                    select(Delivery).where(col(Delivery.key).startswith("omi-answer:"))
                )
                return list(rows.all())

        for _ in range(600):
            if await answered():
                break
            await asyncio.sleep(0.1)
        await outbox.run_due(app.clock.now())

    assert fake.texts("ana") == ["Sunny and warm."]
    question = fake_llm.chat_requests[-1]["messages"][-1]["content"].lower()
    assert "weather" in question and "computer" not in question
    told = await _ambient(app, user.id or 0, "lumber")
    assert len(told) == 1  # the retried chunk was not transcribed a second time
    assert told[0].meta is not None and told[0].meta["device"] == "omi-1"


async def test_an_old_8_khz_omi_is_resampled_and_understood(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app, _ = await _omi_app(app_factory, fake_llm)
    user, token = await add_device(app, "omi-old")
    pcm = read_wav(
        speak("The plumber will come on Thursday afternoon", tmp_path / "p.wav", rate=8000)
    )[0]
    pcm = np.concatenate([pcm, np.zeros(8000, dtype=np.int16)])
    async with running_device(app), client_for(app) as web:
        # One POST, as a backend that sends the whole buffer at once.
        reply = await post_chunk(web, token, pcm.astype("<i2").tobytes(), 8000, key="one")
        assert reply.status_code == 200
        for _ in range(600):
            if await _ambient(app, user.id or 0, "lumber"):
                break
            await asyncio.sleep(0.1)
    assert len(await _ambient(app, user.id or 0, "lumber")) == 1


async def test_wrong_revoked_and_malformed_posts_are_refused_and_store_nothing(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app, _ = await _omi_app(app_factory, fake_llm)
    _, token = await add_device(app, "omi-x")
    audio = b"\x00\x01" * 16000
    async with client_for(app) as web:
        wrong = await post_chunk(web, "lbd_not-a-token", audio, 16000, key="a")
        assert wrong.status_code == 401 and "revoked" in wrong.json()["detail"]
        no_rate = await web.post(f"/omi/{token}?uid=u", content=audio)
        assert no_rate.status_code == 400 and "sample_rate" in no_rate.json()["detail"]
        silly = await post_chunk(web, token, audio, 3, key="b")
        assert silly.status_code == 400
        big = await web.post(
            f"/omi/{token}?sample_rate=16000&uid=u", content=b"\x00" * (9 * 1024 * 1024)
        )
        assert big.status_code == 413
        async with app.db.session() as s:
            await DeviceRepo(s).revoke("omi-x", app.clock.now())
        revoked = await post_chunk(web, token, audio, 16000, key="c")
        assert revoked.status_code == 401
    assert await app.omi.pending() == []


async def test_a_chunk_left_half_fed_by_a_crash_is_fed_exactly_once(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app, _ = await _omi_app(app_factory, fake_llm)
    user, token = await add_device(app, "omi-crash")
    pcm = read_wav(speak("The plumber will come on Thursday afternoon", tmp_path / "p.wav"))[0]
    pcm = np.concatenate([pcm, np.zeros(16000, dtype=np.int16)])
    async with client_for(app) as web:
        assert (
            await post_chunk(web, token, pcm.astype("<i2").tobytes(), 16000, key="x")
        ).status_code == 200
    # A crash right after the chunk was marked as being appended, before the append.
    [chunk] = await app.omi.pending()
    await app.omi.claim(chunk, "deadbeef", 0)
    async with running_device(app):
        for _ in range(600):
            if await _ambient(app, user.id or 0, "lumber"):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
    assert len(await _ambient(app, user.id or 0, "lumber")) == 1
    assert await app.omi.pending() == [] and await app.omi.claimed() == []


async def test_after_a_restart_an_answer_for_an_omi_device_still_goes_to_the_linked_channel(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app, fake = await _omi_app(app_factory, fake_llm)
    user, token = await add_device(app, "omi-r")
    async with app.db.session() as s:
        await UserRepo(s).add_identity(user.id or 0, "fake", "acct", "ana", chat_id="ana")
    async with client_for(app) as web:  # the device has sent through Omi before
        assert (await post_chunk(web, token, b"\x00\x00" * 1600, 16000, key="z")).status_code == 200
    async with running_device(app) as dev:  # a fresh process: nothing fed through Omi yet
        receipt = await dev.adapter.send(
            OutboundMessage(Address("device", "default", "omi-r"), "Sunny and warm.")
        )
        assert receipt.message_id.startswith("omi-answer:")
        await app.jobs.outbox.run_due(app.clock.now())
    assert fake.texts("ana") == ["Sunny and warm."]


async def test_audio_fed_long_after_it_arrived_keeps_the_time_it_was_spoken(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Chunks waiting through a restart are dated by their arrival, not by when they are fed."""
    app = await app_factory(fake_llm, omi_idle_seconds=2.0)
    user, token = await add_device(app, "omi-1")
    pcm = read_wav(speak("The plumber will come on Thursday", tmp_path / "p.wav", rate=16000))[0]
    pcm = np.concatenate([pcm, np.zeros(16000, dtype=np.int16)])
    async with client_for(app) as web:  # lifebot's feeder is not running: the chunk waits
        reply = await post_chunk(web, token, pcm.astype("<i2").tobytes(), 16000, key="one")
        assert reply.status_code == 200
    arrived = datetime.now(UTC)
    # Fed three seconds later (after a restart it can be hours): twice the tolerance below,
    # so a time taken when it was fed is told from the time it arrived.
    await asyncio.sleep(3)
    async with running_device(app):
        for _ in range(600):
            if told := await _ambient(app, user.id or 0, "Thursday"):
                break
            await asyncio.sleep(0.1)
    [said] = told
    started = arrived - timedelta(seconds=pcm.size / 16000)
    assert abs((said.created_at - started).total_seconds()) < 1.5, (said.created_at, started)
