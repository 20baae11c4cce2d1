"""Voice from other devices and speech out (issue 23): each figure against a same-run baseline.

1. Speech output: espeak-ng's real-time factor (synthesis time / seconds of speech) per
   sentence, and the OGG/Opus voice-note encoding on top of it.
2. Omi: time to acknowledge a 6-second chunk through the web app (auth, dedupe, a synced file)
   against writing and syncing the same bytes directly.
3. Home Assistant (Wyoming over TCP loopback): ``audio-stop`` -> ``transcript`` against a direct
   ``transcribe_pcm`` of the same audio.

Run: ``.venv/bin/python -m bench voice`` (about half a minute; ``bench device`` runs it too).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from bench._stats import pct, summary
from bot.app.build import build_app, start_app, start_wyoming
from bot.device.wyoming import WyomingService
from bot.speech.fair import FairTranscriber
from bot.speech.synthesize import EspeakSynthesizer
from bot.speech.transcribe import FasterWhisperTranscriber
from bot.speech.voicenote import ogg_opus
from tests.support.app import add_user, make_settings
from tests.support.device import add_device
from tests.support.speech import read_wav, speak

SENTENCES = [
    "Your dentist appointment is at nine tomorrow.",
    "Bring your insurance card.",
    "The plumber will come on Thursday afternoon.",
    "You have three meetings today, the first at ten.",
    "It will be sunny and warm, with a light breeze in the evening.",
    "Remember to buy bread and milk on the way home.",
]


async def speech_output() -> None:
    """espeak-ng's real-time factor and the voice-note encoding's."""
    synth = EspeakSynthesizer()
    await synth.synthesize("warm up")
    synth_rtf, encode_rtf = [], []
    for text in SENTENCES * 3:
        t0 = time.perf_counter()
        speech = await synth.synthesize(text)
        t1 = time.perf_counter()
        await asyncio.to_thread(ogg_opus, speech)
        t2 = time.perf_counter()
        synth_rtf.append((t1 - t0) / speech.seconds)
        encode_rtf.append((t2 - t1) / speech.seconds)
    print("speech output (espeak-ng, one sentence at a time):")
    print(
        f"  synthesis real-time factor : p50 {pct(synth_rtf, 50):.3f}  p95 {pct(synth_rtf, 95):.3f}"
    )
    print(
        f"  + OGG/Opus voice note      : p50 {pct(encode_rtf, 50):.3f}  "
        f"p95 {pct(encode_rtf, 95):.3f}  (seconds of work per second of speech)"
    )


async def omi_ack(tmp: Path) -> None:
    """POST /omi/<token> -> 200, against writing + fsync of the same bytes."""
    app = build_app(make_settings(tmp, web_enabled=False))
    await start_app(app)
    try:
        _, token = await add_device(app, "bench-omi")
        chunk = os.urandom(16000 * 2 * 6)  # what Omi sends with "every 5 seconds"
        acks, direct = [], []
        transport = httpx.ASGITransport(app=app.web.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as web:
            for i in range(30):
                t0 = time.perf_counter()
                reply = await web.post(
                    f"/omi/{token}?sample_rate=16000&uid=u",
                    content=chunk,
                    headers={"Idempotency-Key": f"k{i}"},
                )
                acks.append(time.perf_counter() - t0)
                assert reply.status_code == 200
                path = tmp / f"direct{i}.raw"
                t0 = time.perf_counter()
                with path.open("wb") as f:
                    f.write(chunk)
                    f.flush()
                    os.fsync(f.fileno())
                direct.append(time.perf_counter() - t0)
    finally:
        await app.close()
    print("\nOmi: a 6 s chunk (192 kB) posted -> acknowledged (stored and synced), 30 chunks")
    print(f"  webhook : {summary(acks)}")
    print(f"  direct  : {summary(direct)}  (write + fsync of the same bytes)")
    print(f"  ratio   : p50 {pct(acks, 50) / pct(direct, 50):.2f}x  (Omi waits up to 15 s)")


async def wyoming_asr(tmp: Path, stt: FasterWhisperTranscriber) -> None:
    """audio-stop -> transcript over TCP, against transcribe_pcm of the same audio."""
    app = build_app(
        make_settings(tmp, wyoming_enabled=True, wyoming_port=0, wyoming_user="bench"),
        transcriber=stt,
    )
    await start_app(app)
    try:
        await add_user(app, "bench-chat", name="bench")
        await start_wyoming(app, FairTranscriber(stt))
        service = app.channels["wyoming"]
        assert isinstance(service, WyomingService)
        clips = [read_wav(speak(t, tmp / f"w{i}.wav"))[0] for i, t in enumerate(SENTENCES)]
        via, direct = [], []
        for pcm in clips * 2:
            raw = pcm.astype("<i2").tobytes()
            fmt = {"rate": 16000, "width": 2, "channels": 1}
            async with AsyncTcpClient("127.0.0.1", service.bound_port) as client:
                await client.write_event(Transcribe(language="en").event())
                await client.write_event(AudioStart(**fmt).event())
                for i in range(0, len(raw), 2048):
                    await client.write_event(AudioChunk(audio=raw[i : i + 2048], **fmt).event())
                t0 = time.perf_counter()
                await client.write_event(AudioStop().event())
                while (event := await client.read_event()) is not None:
                    if event.type == "transcript":
                        break
                via.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await stt.transcribe_pcm(pcm.astype(np.float32) / 32768.0, language="en")
            direct.append(time.perf_counter() - t0)
    finally:
        await app.close()
    print(f"\nHome Assistant (Wyoming asr): audio-stop -> transcript ({len(via)} utterances)")
    print(f"  wyoming : {summary(via)}")
    print(f"  direct  : {summary(direct)}  (transcribe_pcm of the same audio)")
    print(f"  ratio   : p50 {pct(via, 50) / pct(direct, 50):.2f}x")


async def run(stt: FasterWhisperTranscriber | None = None) -> None:
    """Every figure of this module (``bench.device`` passes its loaded model)."""
    if stt is None:
        stt = FasterWhisperTranscriber("tiny.en")
        stt.load()
    await speech_output()
    with tempfile.TemporaryDirectory() as tmp:
        await omi_ack(Path(tmp) / "omi")
        await wyoming_asr(Path(tmp) / "wyoming", stt)


def main() -> None:
    """Entry point for ``python -m bench voice``."""
    print(f"{os.cpu_count()} cores; the machine is shared, so read the ratios, not the seconds")
    asyncio.run(run())


if __name__ == "__main__":
    main()
