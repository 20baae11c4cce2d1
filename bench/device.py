"""The pendant: end-of-utterance latency, concurrent real-time streams, memory.

Everything runs in this process over loopback: the real WebSocket server, the real pipeline
(spool, Silero VAD, SQLite) and the bundled tiny.en model (int8, CPU), fed espeak-ng speech.

0. Served against direct word error rate: the test clips (some with a pause VAD cuts at)
   through a pendant in ambient mode, against the model on each clip alone, same run.
1. Latency, push-to-talk: ``audio-stop`` sent -> final transcript received, per utterance,
   against a direct ``WhisperModel.transcribe`` of the same audio in this run (the ratio is
   what the pipeline adds: spool read, queueing, database, frames).
2. Latency, VAD in real time: the last speech sample sent (paced like a microphone) -> final
   transcript; includes the silence VAD waits for before it ends an utterance.
3. Concurrency: N devices stream speech in real time at once; an N is sustained while the
   p95 lag stays bounded and the last utterances are not later than the first. Run twice in
   the same process: one utterance per model call, then with packing (short utterances that
   wait together share one 30 s window).
4. Resident memory before and after the model loads.
5. ``bench.voice``: speech output real-time factor, Omi acknowledgement, Wyoming transcripts.

Run: ``.venv/bin/python -m bench.device`` (about three minutes on two cores).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import connect

from bench import voice, wer
from bench._stats import pct, summary
from bot.app.build import App, build_app, build_device_adapter, start_app
from bot.device.adapter import DeviceAdapter
from bot.speech.transcribe import FasterWhisperTranscriber
from tests.support import served
from tests.support.app import make_settings
from tests.support.device import add_device
from tests.support.speech import read_wav, speak

PHRASES = [
    "What is on my calendar tomorrow morning",
    "Remember to buy bread and milk",
    "Pick up the laundry after work",
    "My favourite colour is green",
    "Book a table for dinner on Friday",
    "What is the weather like today",
    "Send the report to the team before lunch",
    "The train leaves at seven thirty",
    "Call the dentist to move my appointment",
    "How many steps did I walk yesterday",
    "Add eggs and butter to the shopping list",
    "When is my sister's birthday",
]
UTTERANCES = 24
CHUNK_MS = 40


def rss_mb() -> float:
    """This process's resident memory."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Bench:
    """One app with the pendant channel on a free port."""

    def __init__(self, tmp: Path, stt: FasterWhisperTranscriber) -> None:
        self.tmp = tmp
        self.stt = stt
        self.app: App | None = None
        self.adapter: DeviceAdapter | None = None
        self.url = ""
        self.clips = [speak(t, tmp / f"c{i}.wav") for i, t in enumerate(PHRASES)]
        self.pcm = [read_wav(c)[0] for c in self.clips]

    async def start(self) -> None:
        self.app = build_app(make_settings(self.tmp))
        await start_app(self.app)
        adapter = build_device_adapter(self.app, transcriber=self.stt)
        self.adapter = adapter
        adapter.server.port = 0
        self.app.add_channel(adapter)
        await adapter.start(self.app.dispatcher.handle)
        self.url = f"ws://127.0.0.1:{adapter.server.bound_port}/v1/device"

    async def token(self, name: str) -> str:
        assert self.app is not None
        return (await add_device(self.app, name))[1]

    def direct(self, pcm: np.ndarray) -> float:
        """A bare WhisperModel.transcribe of the same audio, same options as the pipeline."""
        model = self.stt.load()
        audio = pcm.astype(np.float32) / 32768.0
        start = time.perf_counter()
        pieces, _ = model.transcribe(
            audio, language="en", beam_size=self.stt.beam_size, condition_on_previous_text=False
        )
        list(pieces)
        return time.perf_counter() - start

    async def push_to_talk(self) -> tuple[list[float], list[float]]:
        token = await self.token("bench-ptt")
        pipeline, direct = [], []
        headers = {"Authorization": f"Bearer {token}"}
        async with connect(self.url, additional_headers=headers, proxy=None) as ws:
            await ws.send(json.dumps({"type": "hello", "mode": "ambient", "language": "en"}))
            await _until(ws, lambda f: f["type"] == "ready")
            for n in range(UTTERANCES + 2):
                pcm = self.pcm[n % len(self.pcm)]
                await ws.send(json.dumps({"type": "audio-start"}))
                raw = pcm.astype("<i2").tobytes()
                for i in range(0, len(raw), 3200):
                    await ws.send(raw[i : i + 3200])
                start = time.perf_counter()
                await ws.send(json.dumps({"type": "audio-stop"}))
                await _until(ws, lambda f: f["type"] == "transcript" and f["final"])
                took = time.perf_counter() - start
                base = await asyncio.to_thread(self.direct, pcm)
                if n >= 2:  # the first two warm caches
                    pipeline.append(took)
                    direct.append(base)
        return pipeline, direct

    async def stream(self, name: str, token: str, utterances: int) -> list[float]:
        """Stream utterances with 1 s pauses in real time; lag per utterance."""
        headers = {"Authorization": f"Bearer {token}"}
        lags: list[float] = []
        speech_end: dict[int, float] = {}
        async with connect(self.url, additional_headers=headers, proxy=None) as ws:
            await ws.send(json.dumps({"type": "hello", "mode": "ambient", "language": "en"}))
            await _until(ws, lambda f: f["type"] == "ready")

            async def receive() -> None:
                async for raw in ws:
                    frame = json.loads(raw)
                    if frame["type"] == "transcript" and frame["final"]:
                        seq = int(str(frame["segment_id"]).rsplit(":", 1)[1])
                        if seq in speech_end:  # VAD may split a sentence; time whole ones
                            lags.append(time.monotonic() - speech_end[seq])
                        if seq >= utterances - 1:
                            return

            receiver = asyncio.create_task(receive())
            step = 16000 * CHUNK_MS // 1000
            t0 = time.monotonic()
            sent = 0
            for n in range(utterances):
                pcm = self.pcm[(n + len(name)) % len(self.pcm)]
                block = np.concatenate([pcm, np.zeros(16000, dtype=np.int16)])
                for i in range(0, block.size, step):
                    await ws.send(block[i : i + step].astype("<i2").tobytes())
                    sent += min(step, block.size - i)
                    if i <= pcm.size < i + step:
                        speech_end[n] = time.monotonic()
                    await asyncio.sleep(max(0.0, t0 + sent / 16000 - time.monotonic()))
            try:
                await asyncio.wait_for(receiver, 120)
            except TimeoutError:
                receiver.cancel()
        return lags

    async def concurrent(self, n: int, utterances: int, tag: str = "") -> list[list[float]]:
        tokens = [await self.token(f"bench-c{n}{tag}-{i}") for i in range(n)]
        return list(
            await asyncio.gather(
                *(self.stream(f"c{n}-{i}", tok, utterances) for i, tok in enumerate(tokens))
            )
        )

    async def close(self) -> None:
        if self.app is not None:
            await self.app.close()


async def _streams(bench: Bench, tag: str) -> int:
    """The most concurrent real-time streams kept up with (stops at the first that is not)."""
    best = 0
    for n in (2, 4, 6, 8, 10, 12, 14):
        per = await bench.concurrent(n, 8, tag)
        flat = [x for lags in per for x in lags]
        got = sum(len(x) for x in per)
        early = [lags[0] for lags in per if lags]
        late = [lags[-1] for lags in per if lags]
        growing = bool(early and late) and np.mean(late) > np.mean(early) + 2.0
        ok = got == 8 * n and pct(flat, 95) < 5.0 and not growing
        print(
            f"  {n} streams: {got}/{8 * n} transcripts, lag p50 {pct(flat, 50):.2f} s "
            f"p95 {pct(flat, 95):.2f} s, first {np.mean(early):.2f} s -> last "
            f"{np.mean(late):.2f} s  {'sustained' if ok else 'FALLS BEHIND'}"
        )
        if not ok:
            break
        best = n
    return best


async def served_wer(bench: Bench) -> None:
    """Word error rate through the pendant (ambient, VAD) against the model on each clip."""
    all_clips = served.clips(bench.tmp)
    refs = [c.text for c in all_clips]
    alone = [await asyncio.to_thread(served.direct, bench.stt, c) for c in all_clips]
    pieces = await served.served(bench.url, await bench.token("bench-wer"), all_clips, pace=0.005)
    heard = [" ".join(p) for p in pieces]
    direct_wer, served_wer = wer.wer(refs, alone), wer.wer(refs, heard)
    print(
        f"\nserved vs direct WER ({len(refs)} espeak-ng clips, "
        f"{len(served.PAUSED)} with a {served.PAUSE_MS} ms pause VAD cuts at):"
    )
    print(f"  served {served_wer:.3f}  direct {direct_wer:.3f}  ratio "
          f"{served_wer / max(direct_wer, 1e-9):.2f}x  (target <= 1.2x)")  # fmt: skip


async def _until(ws: Any, want: Any) -> dict[str, Any]:
    async with asyncio.timeout(120):
        while True:
            frame = json.loads(await ws.recv())
            if want(frame):
                return dict(frame)


async def run() -> None:
    before = rss_mb()
    stt = FasterWhisperTranscriber("tiny.en")
    t0 = time.perf_counter()
    stt.load()
    print(
        f"model tiny.en int8 on {os.cpu_count()} cores, {stt.cpu_threads} threads, beam "
        f"{stt.beam_size}: loaded in {time.perf_counter() - t0:.2f} s"
    )
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), stt)
        await bench.start()
        try:
            await stt.transcribe_pcm(bench.pcm[0].astype(np.float32) / 32768.0)
            loaded = rss_mb()
            print(
                f"resident memory: {before:.0f} MB before the model, {loaded:.0f} MB with it "
                f"loaded and warm (+{loaded - before:.0f} MB)"
            )

            pipeline, direct = await bench.push_to_talk()
            print(f"\npush-to-talk, audio-stop -> final transcript ({len(pipeline)} utterances)")
            print(f"  pipeline : {summary(pipeline)}")
            print(f"  direct   : {summary(direct)}  (WhisperModel.transcribe, same audio)")
            print(
                f"  ratio    : p50 {pct(pipeline, 50) / pct(direct, 50):.2f}x  "
                f"p95 {pct(pipeline, 95) / pct(direct, 95):.2f}x  (target p50 <= 1.15x)"
            )

            await served_wer(bench)

            silence = bench.app.settings.device_vad_silence_ms if bench.app else 600
            assert bench.adapter is not None
            hub = bench.adapter.hub
            print("\nVAD, real time: end of speech -> final transcript (20 utterances each)")
            variants = [
                ("early final + partials", True, True),
                ("early final, no partials", False, True),
                ("neither (as before)", False, False),
            ]
            for run_no, (label, partials, early) in enumerate(variants):
                hub.options = dataclasses.replace(hub.options, partials=partials, early_final=early)
                lags = (await bench.concurrent(1, 20, f"v{run_no}"))[0]
                print(f"  {label:>24}: {summary(lags)}")
            hub.options = dataclasses.replace(hub.options, partials=True, early_final=True)
            print(
                f"  (each includes the {silence} ms of silence VAD waits for; target p50 <= 0.80 s)"
            )

            sustained = {}
            for pack in (False, True):
                stt.pack = pack
                runs, clips = stt._packer.runs, stt._packer.clips
                label = "packed" if pack else "one per call"
                print(f"\nconcurrent real-time streams, {label} (8 utterances each, 1 s pauses):")
                sustained[pack] = await _streams(bench, "p" if pack else "u")
                if pack and stt._packer.runs > runs:
                    per_run = (stt._packer.clips - clips) / (stt._packer.runs - runs)
                    print(f"  {per_run:.2f} utterances per model call on average")
            print(
                f"  streams sustained: {sustained[False]} one per call -> {sustained[True]} "
                f"packed ({sustained[True] / max(1, sustained[False]):.2f}x, same run)"
            )
        finally:
            await bench.close()
    print()
    await voice.run(stt)  # speech output RTF, Omi acknowledgement, Wyoming asr (issue 23)
    print()
    wer.run()  # word error rate per model (LIFEBOT_BENCH_STT_MODELS adds model folders)


def main() -> None:
    """Entry point for ``python -m bench.device``."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
