"""The pendant end to end: a real WebSocket, real speech from espeak-ng, the real model."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt
from sqlmodel import col, select
from websockets.asyncio.client import connect

from bot.app.build import App
from storage.models import MemoryItem, Message
from storage.repos.facts import FactRepo
from tests.fakes.llm import FakeLLM, say
from tests.fakes.transcriber import GatedTranscriber
from tests.support.app import AppFactory
from tests.support.device import add_device, eventually, running_device
from tests.support.speech import concat_wavs, read_wav, shared_transcriber, speak, to_stereo


def opus_packets(pcm: npt.NDArray[np.int16], rate: int) -> list[bytes]:
    """Raw 20 ms Opus packets, as a pendant's encoder would send them."""
    enc = av.CodecContext.create("libopus", "w")
    enc.sample_rate = rate
    enc.layout = "mono"
    enc.format = av.AudioFormat("s16")
    enc.bit_rate = 24000
    enc.open()
    step = rate // 50
    out: list[bytes] = []
    for i in range(0, pcm.size - step + 1, step):
        frame = av.AudioFrame.from_ndarray(
            pcm[i : i + step].reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = rate
        frame.pts = i
        out += [bytes(p) for p in enc.encode(frame)]
    out += [bytes(p) for p in enc.encode(None)]
    return out


async def test_ask_mode_transcribes_the_question_and_streams_the_reply(
    any_db_app: App, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = any_db_app
    user, token = await add_device(app, "pendant-1")
    async with app.db.session() as s:  # what the answer rests on (answers are checked)
        await FactRepo(s).add(user.id or 0, "dentist appointment tomorrow at nine", "events")
    fake_llm.default = lambda body: say("Your dentist appointment is at nine tomorrow.")
    clip = speak("What is on my calendar tomorrow morning", tmp_path / "q.wav")

    async with running_device(app) as dev:
        result = await dev.sim(clip, token, mode="ask")

    assert result.session_id
    assert len(result.transcripts) == 1
    heard = result.transcripts[0].lower()
    assert "calendar" in heard and "tomorrow" in heard
    assert result.replies == ["Your dentist appointment is at nine tomorrow."]
    deltas = "".join(f["text"] for f in result.of("reply-delta"))
    assert deltas == "Your dentist appointment is at nine tomorrow."
    # The agent saw the spoken words as the user's message.
    last = fake_llm.chat_requests[-1]["messages"]
    assert any("calendar" in str(m.get("content", "")).lower() for m in last if m["role"] == "user")
    async with app.db.session() as s:
        rows = (
            await s.exec(
                select(Message).where(Message.user_id == user.id, Message.channel == "device")
            )
        ).all()
    inbound = [r for r in rows if r.direction == "in"]
    assert len(inbound) == 1 and "calendar" in inbound[0].text.lower()
    assert inbound[0].sender_id == "pendant-1"


async def test_ambient_mode_stores_what_was_said_with_times_and_sends_no_reply(
    any_db_app: App, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = any_db_app  # SQLite, and PostgreSQL when the test server is there
    user, token = await add_device(app, "pendant-2")
    clip = speak("The plumber will come on Thursday afternoon", tmp_path / "a.wav")

    started = datetime.now(UTC)
    async with running_device(app) as dev:
        result = await dev.sim(clip, token, mode="ambient", realtime=True)

    assert len(result.transcripts) == 1 and "plumber" in result.transcripts[0].lower()
    assert result.replies == []
    assert fake_llm.chat_requests == []
    async with app.db.session() as s:
        rows = (
            await s.exec(
                select(Message).where(
                    Message.user_id == user.id, col(Message.text).contains("lumber")
                )
            )
        ).all()
    assert len(rows) == 1
    row = rows[0]
    assert (row.channel, row.direction, row.role, row.sender_id) == (
        "device",
        "in",
        "user",
        "pendant",
    )
    assert row.meta is not None
    assert row.meta["device"] == "pendant-2"
    assert row.meta["session_id"] == result.session_id
    assert 0 <= row.meta["start"] < row.meta["end"]
    # Stored at the wall-clock time the words were spoken, not when transcription finished.
    spoken = row.created_at
    assert started - timedelta(seconds=1) <= spoken <= started + timedelta(seconds=3)
    # The memory feature indexes it for search (index_pending is called after ambient rows).
    async with app.db.session() as s:
        items = (await s.exec(select(MemoryItem).where(MemoryItem.user_id == user.id))).all()
    assert [i.source_id for i in items if "lumber" in i.text] == [row.id]


async def test_three_devices_at_once_each_get_their_own_transcripts(
    app: App, tmp_path: Path
) -> None:
    phrases = {
        "pendant-x": ("Remember to buy bread and milk", "bread"),
        "pendant-y": ("Pick up the laundry after work", "laundry"),
        "pendant-z": ("My favourite colour is green", "green"),
    }
    tokens = {name: (await add_device(app, name))[1] for name in phrases}
    clips = {n: speak(text, tmp_path / f"{n}.wav") for n, (text, _) in phrases.items()}

    async with running_device(app) as dev:
        results = await asyncio.gather(
            *(
                dev.sim(clips[n], tokens[n], mode="ambient", realtime=True, chunk_ms=40)
                for n in phrases
            )
        )

    for (name, (_, word)), result in zip(phrases.items(), results, strict=True):
        assert len(result.transcripts) == 1, name
        assert word in result.transcripts[0].lower(), (name, result.transcripts)
        others = [w for n, (_, w) in phrases.items() if n != name]
        assert not any(w in result.transcripts[0].lower() for w in others)
    assert len({r.session_id for r in results}) == 3


async def test_push_to_talk_brackets_one_utterance_with_pauses_inside(
    app: App, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    _, token = await add_device(app, "pendant-ptt")
    fake_llm.default = lambda body: say("Noted.")
    first = speak("Book a table for dinner on Friday", tmp_path / "1.wav")
    second = speak("Pick up the laundry after work", tmp_path / "2.wav")
    joined = concat_wavs(tmp_path / "ptt.wav", first, second, gap=1.5)

    async with running_device(app) as dev:
        result = await dev.sim(joined, token, mode="ask", push_to_talk=True)

    # A 1.5 s pause would end an utterance under VAD; with the button held it does not.
    assert len(result.transcripts) == 1
    heard = result.transcripts[0].lower()
    assert "dinner" in heard and "laundry" in heard
    assert result.replies == ["Noted."]


async def test_a_44khz_stereo_stream_is_resampled_and_understood(app: App, tmp_path: Path) -> None:
    _, token = await add_device(app, "pendant-hifi")
    mono = speak("What is the weather like today", tmp_path / "m.wav", rate=44100)
    stereo = to_stereo(mono, tmp_path / "s.wav")

    async with running_device(app) as dev:
        result = await dev.sim(stereo, token, mode="ambient")

    assert len(result.transcripts) == 1 and "weather" in result.transcripts[0].lower()
    # Times are seconds of the session's audio, not of the device's sample clock.
    final = next(f for f in result.of("transcript") if f["final"])
    assert 1.0 < final["end"] - final["start"] < 4.0


async def test_the_wake_phrase_turns_one_ambient_utterance_into_a_question(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # tiny.en does not hear espeak's "lifebot" reliably; the phrase is a setting.
    app = await app_factory(fake_llm, device_wake_phrase="hey computer")
    user, token = await add_device(app, "pendant-w")
    fake_llm.default = lambda body: say("Sunny and warm.")
    ask = speak("Hey computer, what is the weather like today", tmp_path / "w.wav")
    chat = speak("Pick up the laundry after work", tmp_path / "c.wav")
    clip = concat_wavs(tmp_path / "both.wav", ask, chat, gap=1.2)

    async with running_device(app) as dev:
        result = await dev.sim(clip, token, mode="ambient")

    assert result.replies == ["Sunny and warm."], result.transcripts
    question = fake_llm.chat_requests[-1]["messages"][-1]["content"].lower()
    assert "weather" in question and "computer" not in question
    async with app.db.session() as s:
        ambient = (
            await s.exec(
                select(Message).where(Message.user_id == user.id, Message.sender_id == "pendant")
            )
        ).all()
    assert [("laundry" in m.text.lower()) for m in ambient] == [True]


async def test_opus_packets_are_decoded(app: App, tmp_path: Path) -> None:
    _, token = await add_device(app, "pendant-opus")
    pcm, rate = read_wav(speak("Remember to buy bread and milk", tmp_path / "o.wav"))
    packets = opus_packets(np.concatenate([pcm, np.zeros(rate, dtype=np.int16)]), rate)

    async with (
        running_device(app) as dev,
        connect(dev.url, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None) as ws,
    ):
        await ws.send(
            json.dumps({"type": "hello", "codec": "opus", "sample_rate": 16000, "mode": "ambient"})
        )
        assert json.loads(await ws.recv())["type"] == "ready"
        for packet in packets:
            await ws.send(packet)
        async with asyncio.timeout(30):
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] == "transcript" and frame["final"]:
                    break
    assert "bread" in frame["text"].lower()


async def test_a_slow_transcriber_never_holds_audio_in_memory(app: App, tmp_path: Path) -> None:
    _, token = await add_device(app, "pendant-slow")
    parts = [
        speak(t, tmp_path / f"s{i}.wav")
        for i, t in enumerate(
            [
                "Remember to buy bread and milk",
                "Pick up the laundry after work",
                "My favourite colour is green",
            ]
        )
    ]
    clip = concat_wavs(tmp_path / "slow.wav", *parts, gap=1.0)
    slow = GatedTranscriber(shared_transcriber())

    async with running_device(app, transcriber=slow) as dev:
        streaming = asyncio.create_task(dev.sim(clip, token, mode="ambient", wait_seconds=60))
        # Every utterance is announced and its audio is on disk while nothing is transcribed.
        sent = read_wav(clip)[0].size
        await eventually(lambda: slow.started >= 1 and len(dev.adapter.hub.sessions) == 1)
        pipeline = next(iter(dev.adapter.hub.sessions.values()))
        await eventually(lambda: pipeline.spool.samples >= sent)
        assert slow.done == 0
        assert pipeline.spool.path.stat().st_size >= sent * 2
        slow.gate.set()
        result = await streaming

    assert len(result.transcripts) == 3
    assert "bread" in result.transcripts[0].lower()
    assert "laundry" in result.transcripts[1].lower()
    assert "green" in result.transcripts[2].lower()


async def test_a_session_longer_than_the_limit_rolls_over_without_losing_speech(
    app_factory: AppFactory, tmp_path: Path
) -> None:
    app = await app_factory(device_max_session_seconds=3.0)
    user, token = await add_device(app, "pendant-long")
    parts = [
        speak("Remember to buy bread and milk", tmp_path / "l1.wav"),
        speak("Pick up the laundry after work", tmp_path / "l2.wav"),
    ]
    clip = concat_wavs(tmp_path / "long.wav", *parts, gap=1.0)

    async with running_device(app) as dev:
        result = await dev.sim(clip, token, mode="ambient")

    sessions = [f["session_id"] for f in result.of("ready")]
    assert len(set(sessions)) >= 2
    # A finished, closed session's audio is deleted; the open one keeps its spool file.
    spool = app.settings.data_dir / "spool"
    assert not (spool / f"{sessions[0]}.pcm").exists()
    assert (spool / f"{sessions[-1]}.pcm").exists()
    async with app.db.session() as s:
        stored = " ".join(
            m.text.lower()
            for m in (
                await s.exec(
                    select(Message).where(
                        Message.user_id == user.id, Message.sender_id == "pendant"
                    )
                )
            ).all()
        )
    assert "bread" in stored and "laundry" in stored
