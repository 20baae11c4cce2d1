"""Wyoming streaming as Home Assistant drives it (#33), sizes checked before reading (#29),
and the zeroconf announcement. Every exchange uses the ``wyoming`` package's own client."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import ifaddr
import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript, TranscriptChunk
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.handle import Handled, HandledChunk
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from bench.wer import edit_distance, words
from bot.device.announce import SERVICE_TYPE
from tests.fakes.llm import FakeLLM, Step
from tests.support.app import AppFactory
from tests.support.device import eventually
from tests.support.speech import read_wav, shared_transcriber, speak
from tests.support.wyoming import service, wyoming_app

FMT = {"rate": 16000, "width": 2, "channels": 1}


async def _read_all(client: AsyncTcpClient, until: str, got: list[tuple[float, Event]]) -> None:
    while True:
        event = await client.read_event()
        assert event is not None, f"closed before {until}: {[e.type for _, e in got]}"
        got.append((time.monotonic(), event))
        if event.type == until:
            return


async def test_partial_transcripts_arrive_while_the_person_still_speaks(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await wyoming_app(app_factory, fake_llm)
    stt = shared_transcriber()
    await eventually(lambda: stt.idle, 60)
    pcm = read_wav(
        speak(
            "Remember to call the dentist tomorrow morning about the appointment, and then buy "
            "bread and milk and eggs on the way home from work in the evening",
            tmp_path / "long.wav",
        )
    )[0]
    raw = pcm.astype("<i2").tobytes()
    got: list[tuple[float, Event]] = []
    async with AsyncTcpClient("127.0.0.1", service(app).bound_port) as client:
        reader = asyncio.create_task(_read_all(client, "transcript-stop", got))
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(**FMT).event())
        for i in range(0, len(raw), 3200):  # 100 ms a chunk, in real time like a microphone
            await client.write_event(AudioChunk(audio=raw[i : i + 3200], **FMT).event())
            await asyncio.sleep(0.1)
        stop_sent = time.monotonic()
        await client.write_event(AudioStop().event())
        async with asyncio.timeout(60):
            await reader
    kinds = [e.type for _, e in got]
    assert kinds[0] == "transcript-start"
    assert kinds[-2:] == ["transcript", "transcript-stop"]
    early = [e for at, e in got if e.type == "transcript-chunk" and at < stop_sent]
    assert early, f"no words before the end of the audio: {kinds}"
    final = Transcript.from_event(got[-2][1]).text
    assert "dentist" in final.lower()
    chunks = "".join(TranscriptChunk.from_event(e).text for _, e in got if e.type == kinds[1])
    # The chunks join into the transcript (a word the final heard otherwise stays as sent).
    assert edit_distance(words(chunks), words(final)) <= 1, (chunks, final)


async def test_a_long_answer_is_spoken_sentence_by_sentence_as_it_is_written(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await wyoming_app(app_factory, fake_llm, tts_engine="espeak-ng")
    first = "Your dentist appointment is at nine tomorrow."
    second = " Bring your insurance card."
    third = " The plumber will come on Thursday afternoon."
    heard_audio = asyncio.Event()
    got: list[Event] = []
    before_third = False
    async with AsyncTcpClient("127.0.0.1", service(app).bound_port) as client:

        async def read() -> None:
            while (event := await client.read_event()) is not None:
                got.append(event)
                if event.type == "audio-chunk":
                    heard_audio.set()
                if event.type == "synthesize-stopped":
                    return

        reader = asyncio.create_task(read())
        # As Home Assistant's tts entity writes while the model answers: the chunks, then a
        # copy of the whole text in a plain synthesize, then synthesize-stop.
        await client.write_event(SynthesizeStart().event())
        for piece in (first[:20], first[20:], second):
            await client.write_event(SynthesizeChunk(text=piece).event())
        try:
            await asyncio.wait_for(heard_audio.wait(), 20)
            before_third = True
        except TimeoutError:
            pass
        await client.write_event(SynthesizeChunk(text=third).event())
        await client.write_event(Synthesize(text=first + second + third).event())
        await client.write_event(SynthesizeStop().event())
        async with asyncio.timeout(60):
            await reader
    assert before_third, "no audio before the third sentence was written"
    kinds = [e.type for e in got]
    assert kinds.count("audio-start") == 3 == kinds.count("audio-stop")  # one per sentence
    assert kinds[-1] == "synthesize-stopped"
    start = AudioStart.from_event(got[0])
    audio = b"".join(AudioChunk.from_event(e).audio for e in got if e.type == "audio-chunk")
    pcm = np.frombuffer(audio, dtype="<i2").astype(np.float32) / 32768.0
    idx = np.arange(0, pcm.size, start.rate / 16000).astype(int)
    heard = (await shared_transcriber().transcribe_pcm(pcm[idx], language="en")).text.lower()
    assert "insurance" in heard and "thursday" in heard  # every sentence, spoken once


async def test_the_answer_streams_in_handled_chunks(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await wyoming_app(app_factory, fake_llm)
    answer = "The dentist opens at nine. Bring your insurance card and arrive ten minutes early."
    fake_llm.default = lambda body: Step(text=answer, chunk_delay=0.05)
    got: list[tuple[float, Event]] = []
    async with AsyncTcpClient("127.0.0.1", service(app).bound_port) as client:
        await client.write_event(
            Transcript(text="When is the dentist?", context={"conversation_id": "c1"}).event()
        )
        async with asyncio.timeout(60):
            await _read_all(client, "handled-stop", got)
    kinds = [e.type for _, e in got]
    assert kinds[0] == "handled-start" and kinds[-2:] == ["handled", "handled-stop"]
    chunks = [(at, HandledChunk.from_event(e).text) for at, e in got if e.type == "handled-chunk"]
    assert len(chunks) >= 3
    assert "".join(t for _, t in chunks) == Handled.from_event(got[-2][1]).text == answer
    assert got[-2][0] - chunks[0][0] > 0.2  # the first words came well before the whole answer


@pytest.mark.parametrize("field", ["payload_length", "data_length"])
async def test_a_declared_length_over_the_cap_is_refused_unread(
    app_factory: AppFactory, fake_llm: FakeLLM, field: str
) -> None:
    app = await wyoming_app(app_factory, fake_llm)
    assert service(app).announcement is None  # on loopback: nothing to discover
    port = service(app).bound_port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    header = {"type": "audio-chunk", field: 2_000_000_000}
    writer.write(json.dumps(header).encode() + b"\n" + b"\0" * 65536)
    await writer.drain()
    async with asyncio.timeout(10):
        event = await async_read_event(reader)
        assert event is not None and Error.is_type(event.type)
        assert "limit" in Error.from_event(event).text
        assert await reader.read() == b""  # and the connection is closed
    writer.close()
    # The service itself is fine: the next connection is answered.
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Describe().event())
        event = await client.read_event()
        assert event is not None and Info.is_type(event.type)


def _lan_ipv4() -> str | None:
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127."):
                return ip.ip
    return None


async def test_bound_beyond_loopback_it_is_announced_over_zeroconf(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    lan = _lan_ipv4()
    if lan is None:
        pytest.skip("this machine has no IPv4 address besides loopback")
    app = await wyoming_app(app_factory, fake_llm, wyoming_host=lan)
    announced = service(app).announcement
    assert announced is not None
    browser = AsyncZeroconf(interfaces=[lan], ip_version=IPVersion.V4Only)
    try:
        found = AsyncServiceInfo(SERVICE_TYPE, announced.name)
        assert await found.async_request(browser.zeroconf, 3000)
        assert found.parsed_addresses() == [lan]
        assert found.port == service(app).bound_port
    finally:
        await browser.async_close()
