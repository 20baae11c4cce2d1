"""Captured audio is never lost: kill the server mid-utterance, restart, the transcript appears."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from sqlmodel import select
from websockets.asyncio.client import connect

from bot.app.build import App
from storage.models import Message
from tests.fakes.llm import FakeLLM, say
from tests.fakes.transcriber import GatedTranscriber
from tests.support.app import AppFactory
from tests.support.device import add_device, eventually, running_device
from tests.support.env import process_env
from tests.support.serve import spawn_serve
from tests.support.speech import shared_transcriber, speak


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = process_env(
        tmp_path,
        LIFEBOT_DEVICE_HOST="127.0.0.1",
        LIFEBOT_DEVICE_PORT=str(port),
        LIFEBOT_STT_THREADS="2",
        LIFEBOT_JOBS_ENABLED="false",
    )
    return spawn_serve(tmp_path, env)


async def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "lifebot serve exited early; see serve.log"
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError("lifebot serve did not start listening")


@pytest.mark.slow
async def test_killing_the_server_mid_utterance_loses_no_audio(
    app_factory: AppFactory, tmp_path: Path
) -> None:
    app = await app_factory()
    user, token = await add_device(app, "pendant-k")
    clip = speak("Remember that the boiler code is four four two one", tmp_path / "k.wav")
    pcm = clip.read_bytes()[44:]  # the WAV header is 44 bytes for sox's plain PCM output
    port = _free_port()

    proc = _serve(tmp_path, port)
    try:
        await _wait_listening(port, proc)
        url = f"ws://127.0.0.1:{port}/v1/device"
        async with connect(
            url, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None
        ) as ws:
            await ws.send(json.dumps({"type": "hello", "mode": "ambient", "sample_rate": 16000}))
            assert json.loads(await ws.recv())["type"] == "ready"
            # Speech without the trailing pause: the utterance is still open when we kill.
            for i in range(0, len(pcm), 3200):
                await ws.send(pcm[i : i + 3200])
            await ws.send(json.dumps({"type": "ping"}))
            while json.loads(await ws.recv())["type"] != "pong":
                pass
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    async def stored() -> list[Message]:
        async with app.db.session() as s:
            res = await s.exec(
                select(Message).where(Message.user_id == user.id, Message.channel == "device")
            )
            return list(res.all())

    assert await stored() == []  # nothing was transcribed before the crash

    proc = _serve(tmp_path, port)
    try:
        deadline = time.monotonic() + 60
        rows: list[Message] = []
        while time.monotonic() < deadline and not rows:
            await asyncio.sleep(0.2)
            rows = await stored()
        assert rows, "the spooled utterance was not transcribed after the restart"
        assert "boiler" in rows[0].text.lower()
        assert rows[0].sender_id == "pendant"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def test_utterances_cut_but_not_transcribed_are_finished_at_the_next_start(
    app: App, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    user, token = await add_device(app, "pendant-p")
    fake_llm.default = lambda body: say("It is sunny.")
    ambient = speak("My favourite colour is green", tmp_path / "g.wav")
    question = speak("What is the weather like today", tmp_path / "w.wav")
    stuck = GatedTranscriber(shared_transcriber())  # never opens: the server "dies" first

    async with running_device(app, transcriber=stuck, stop_grace_seconds=0.0) as dev:
        for clip, mode in ((ambient, "ambient"), (question, "ask")):
            result = await dev.sim(clip, token, mode=mode, wait_seconds=0.5)
            assert len(result.of("transcript")) == 1  # announced, not transcribed
    assert stuck.done == 0

    async with running_device(app) as dev:  # start-up recovers what is pending
        await eventually(lambda: len(fake_llm.chat_requests) >= 1)
        assert await dev.adapter.hub.drain(30)

    async with app.db.session() as s:
        rows = (await s.exec(select(Message).where(Message.user_id == user.id))).all()
    said = [r.text.lower() for r in rows if r.sender_id == "pendant"]
    asked = [r.text.lower() for r in rows if r.direction == "in" and r.sender_id == "pendant-p"]
    answered = [r.text for r in rows if r.direction == "out"]
    assert len(said) == 1 and "green" in said[0]
    assert len(asked) == 1 and "weather" in asked[0]
    assert answered == ["It is sunny."]  # stored; the pendant was offline to hear it
