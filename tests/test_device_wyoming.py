"""Home Assistant's side of Wyoming (issue 23): the ``wyoming`` client library over TCP on
loopback, one connection per request as Home Assistant's integration does it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlmodel import select
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.handle import Handled, NotHandled
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize

from bot.app.build import App, start_wyoming
from bot.device.wyoming import WyomingService
from bot.errors import ConfigError
from bot.speech.fair import FairTranscriber
from storage.models import Message
from tests.fakes.llm import FakeLLM, say
from tests.support.app import AppFactory, add_user
from tests.support.speech import read_wav, shared_transcriber, speak


async def _service(app_factory: AppFactory, fake_llm: FakeLLM, **settings: Any) -> App:
    settings = {"wyoming_enabled": True, "wyoming_port": 0, "wyoming_user": "ana", **settings}
    app = await app_factory(fake_llm, transcriber=shared_transcriber(), **settings)
    await add_user(app, "ana-chat", name="ana")
    await add_user(app, "bob-chat", name="bob")
    await start_wyoming(app, FairTranscriber(app.transcriber))
    return app


def _port(app: App) -> int:
    service = app.channels["wyoming"]
    assert isinstance(service, WyomingService)
    return service.bound_port


async def _ask(app: App, *events: Event, until: str) -> list[Event]:
    """Open a connection, send ``events``, read until an event of type ``until``."""
    got: list[Event] = []
    async with AsyncTcpClient("127.0.0.1", _port(app), read_timeout=60) as client:
        for event in events:
            await client.write_event(event)
        while True:
            event = await client.read_event()
            assert event is not None, f"closed before {until}: {got}"
            got.append(event)
            if event.type == until:
                return got


def _audio_events(pcm: np.ndarray, rate: int) -> list[Event]:
    fmt = {"rate": rate, "width": 2, "channels": 1}
    raw = pcm.astype("<i2").tobytes()
    chunks = [AudioChunk(audio=raw[i : i + 2048], **fmt).event() for i in range(0, len(raw), 2048)]
    return [AudioStart(**fmt).event(), *chunks, AudioStop().event()]


async def test_describe_lists_exactly_asr_and_handle_when_speech_output_is_off(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await _service(app_factory, fake_llm)
    [event] = await _ask(app, Describe().event(), until="info")
    info = Info.from_event(event)
    assert [p.name for p in info.asr] == ["lifebot-asr"]
    assert info.asr[0].supports_transcript_streaming is True
    assert [p.name for p in info.handle] == ["lifebot"]
    assert info.handle[0].supports_handled_streaming is True
    assert info.handle[0].supports_home_control is False  # keep "prefer local commands" on
    assert info.tts == [] and info.intent == [] and info.wake == []


async def test_a_spoken_command_becomes_a_transcript(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await _service(app_factory, fake_llm)
    pcm, rate = read_wav(speak("What is on my calendar tomorrow", tmp_path / "q.wav", rate=22050))
    events = [Transcribe(language="en").event(), *_audio_events(pcm, rate)]
    got = await _ask(app, *events, until="transcript")
    text = Transcript.from_event(got[-1]).text.lower()
    assert "calendar" in text and "tomorrow" in text
    assert fake_llm.chat_requests == []  # asr only transcribes: nothing is asked


async def test_handle_answers_with_the_agent_for_the_mapped_user(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await _service(app_factory, fake_llm, wyoming_satellites="kitchen=bob")
    fake_llm.default = lambda body: say("The dentist opens at nine.")
    context = {"conversation_id": "c1", "satellite_id": "lounge"}
    got = await _ask(
        app, Transcript(text="When is the dentist?", context=context).event(), until="handled"
    )
    assert Handled.from_event(got[-1]).text == "The dentist opens at nine."

    # (A greeting: an answer that claims nothing the verifier would have to find in records.)
    fake_llm.default = lambda body: say("Good evening, Bob.")
    kitchen = {"conversation_id": "c2", "satellite_id": "kitchen"}
    got = await _ask(
        app, Transcript(text="Say good evening", context=kitchen).event(), until="handled"
    )
    assert Handled.from_event(got[-1]).text == "Good evening, Bob."

    async with app.db.session() as s:
        rows = (await s.exec(select(Message).where(Message.channel == "wyoming"))).all()
    owners = {r.text: r.user_id for r in rows if r.direction == "in"}
    users = {r.user_id for r in rows}
    assert len(users) == 2
    assert owners["When is the dentist?"] != owners["Say good evening"]


async def test_an_empty_transcript_is_not_handled(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await _service(app_factory, fake_llm)
    [event] = await _ask(app, Transcript(text="  ").event(), until="not-handled")
    assert NotHandled.from_event(event).text
    assert fake_llm.chat_requests == []


async def test_tts_speaks_words_the_model_can_hear_back(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await _service(app_factory, fake_llm, tts_engine="espeak-ng")
    [event] = await _ask(app, Describe().event(), until="info")
    info = Info.from_event(event)
    assert [p.name for p in info.tts] == ["lifebot-espeak-ng"]

    got = await _ask(
        app, Synthesize(text="The plumber comes on Thursday.").event(), until="audio-stop"
    )
    start = AudioStart.from_event(got[0])
    assert (start.width, start.channels) == (2, 1)
    audio = b"".join(AudioChunk.from_event(e).audio for e in got if e.type == "audio-chunk")
    pcm = np.frombuffer(audio, dtype="<i2").astype(np.float32) / 32768.0
    assert pcm.size / start.rate > 1.0
    # Back to 16 kHz and through the speech model: the words survive.
    idx = np.arange(0, pcm.size, start.rate / 16000).astype(int)
    heard = await shared_transcriber().transcribe_pcm(pcm[idx], language="en")
    assert "thursday" in heard.text.lower()


async def test_an_unknown_user_setting_is_a_clear_config_error(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm, transcriber=shared_transcriber(), wyoming_user="nobody")
    with pytest.raises(ConfigError, match="nobody"):
        await start_wyoming(app, FairTranscriber(app.transcriber))


async def test_a_synthesis_that_fails_ends_the_request_instead_of_leaving_it_waiting(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """Home Assistant's tts entity sends one ``synthesize`` and reads until ``audio-stop`` or
    the end of the connection (homeassistant/components/wyoming/tts.py): when espeak-ng
    failed (here a voice it does not have), nothing came back and the request hung with the
    connection open. Now it gets an ``error`` and the connection ends, which it reports as a
    failed synthesis at once."""
    app = await _service(app_factory, fake_llm, tts_engine="espeak-ng", tts_voice="zz-nothing")
    got: list[Event] = []
    async with AsyncTcpClient("127.0.0.1", _port(app)) as client:
        await client.write_event(Synthesize(text="The plumber comes on Thursday.").event())
        async with asyncio.timeout(20):
            while (event := await client.read_event()) is not None:
                got.append(event)
                if event.type == "audio-stop":
                    break
    assert [e.type for e in got] == ["error"]
    assert "speech" in Error.from_event(got[0]).text.lower()
