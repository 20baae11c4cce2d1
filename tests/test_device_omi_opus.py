"""Opus on the pendant socket as Omi firmware encodes it: codec 20 (10 ms), 21 (20 ms) (#23)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import pytest
from websockets.asyncio.client import connect

from bot.app.build import App
from tests.support.device import add_device, running_device
from tests.support.speech import read_wav, speak


def omi_packets(pcm: npt.NDArray[np.int16], frame_ms: int) -> list[bytes]:
    """Raw 16 kHz mono Opus packets of ``frame_ms``, one per BLE payload (header stripped)."""
    enc = av.CodecContext.create("libopus", "w")
    enc.sample_rate = 16000
    enc.layout = "mono"
    enc.format = av.AudioFormat("s16")
    enc.bit_rate = 32000
    enc.options = {"frame_duration": str(frame_ms)}
    enc.open()
    step = 16 * frame_ms
    out: list[bytes] = []
    for i in range(0, pcm.size - step + 1, step):
        frame = av.AudioFrame.from_ndarray(
            pcm[i : i + step].reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = 16000
        frame.pts = i
        out += [bytes(p) for p in enc.encode(frame)]
    out += [bytes(p) for p in enc.encode(None)]
    return out


async def _hello(ws: Any, codec: str, rate: int = 16000) -> dict[str, Any]:
    await ws.send(
        json.dumps({"type": "hello", "codec": codec, "sample_rate": rate, "mode": "ambient"})
    )
    frame: dict[str, Any] = json.loads(await ws.recv())
    return frame


@pytest.mark.parametrize(("codec", "frame_ms"), [("omi-opus", 10), ("omi-opus-fs320", 20)])
async def test_omi_opus_frames_one_per_message_are_understood(
    app: App, tmp_path: Path, codec: str, frame_ms: int
) -> None:
    _, token = await add_device(app, f"omi-{frame_ms}")
    pcm, _ = read_wav(speak("Remember to buy bread and milk", tmp_path / "o.wav"))
    packets = omi_packets(np.concatenate([pcm, np.zeros(16000, dtype=np.int16)]), frame_ms)

    async with (
        running_device(app) as dev,
        connect(dev.url, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None) as ws,
    ):
        assert (await _hello(ws, codec))["type"] == "ready"
        for packet in packets:
            await ws.send(packet)
        async with asyncio.timeout(60):
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] == "transcript" and frame["final"]:
                    break
    assert "bread" in frame["text"].lower()


async def test_packets_of_the_other_omi_codec_get_a_plain_error_and_the_socket_stays(
    app: App, tmp_path: Path
) -> None:
    _, token = await add_device(app, "omi-mixed")
    pcm, _ = read_wav(speak("Pick up the laundry", tmp_path / "l.wav"))
    twenty_ms = omi_packets(pcm, 20)

    async with (
        running_device(app) as dev,
        connect(dev.url, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None) as ws,
    ):
        assert (await _hello(ws, "omi-opus"))["type"] == "ready"  # said codec 20: 10 ms
        await ws.send(twenty_ms[3])
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["code"] == "bad_audio"
        assert "160 samples" in error["message"]
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv())["type"] == "pong"


async def test_omi_codecs_are_16_khz_only(app: App) -> None:
    _, token = await add_device(app, "omi-rate")
    async with (
        running_device(app) as dev,
        connect(dev.url, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None) as ws,
    ):
        frame = await _hello(ws, "omi-opus-fs320", rate=48000)
    assert frame["type"] == "error" and frame["code"] == "unsupported_rate"
