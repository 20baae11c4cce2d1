"""Omi (issue 23): kill -9 of ``lifebot serve`` right after a chunk was acknowledged.

A real ``lifebot serve`` takes Omi's POSTs over TCP on loopback; it is killed with SIGKILL the
moment it answered. Omi's backend, having seen no answer in the worst case, retries the chunk
with the same Idempotency-Key once lifebot is back: the speech is stored exactly once.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlmodel import col, select

from storage.models import Message
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory
from tests.support.device import add_device
from tests.support.env import process_env
from tests.support.omi import post_chunk
from tests.support.serve import spawn_serve
from tests.support.speech import read_wav, speak


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, llm: FakeLLM, web_port: int) -> subprocess.Popen[bytes]:
    env = process_env(
        tmp_path,
        LIFEBOT_LLM_MODEL="fake-smart",
        LIFEBOT_LLM_FAST_MODEL="fake-fast",
        OPENAI_BASE_URL=llm.url,
        OPENAI_API_KEY="k",
        LIFEBOT_JOBS_ENABLED="false",
        LIFEBOT_WEB_ENABLED="true",
        LIFEBOT_WEB_PORT=str(web_port),
        LIFEBOT_DEVICE_PORT=str(_free_port()),
        LIFEBOT_OMI_IDLE_SECONDS="1",
        LIFEBOT_STT_THREADS="2",
    )
    return spawn_serve(tmp_path, env)


async def _up(proc: subprocess.Popen[bytes], web: httpx.AsyncClient, tmp_path: Path) -> None:
    async with asyncio.timeout(90):
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if (await web.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_kill_9_right_after_an_acknowledged_chunk_loses_nothing_and_doubles_nothing(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    setup = await app_factory(fake_llm)
    user, token = await add_device(setup, "omi-k")
    speech = read_wav(speak("The plumber will come on Thursday afternoon", tmp_path / "p.wav"))[0]
    chunk = np.concatenate([speech, np.zeros(16000, dtype=np.int16)]).astype("<i2").tobytes()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"

    async def stored() -> list[Message]:
        async with setup.db.session() as s:
            rows = await s.exec(
                select(Message).where(
                    Message.user_id == user.id,
                    Message.sender_id == "pendant",
                    col(Message.text).contains("lumber"),
                )
            )
            return list(rows.all())

    async with httpx.AsyncClient(base_url=base, timeout=15) as web:
        proc = _serve(tmp_path, fake_llm, port)
        try:
            await _up(proc, web, tmp_path)
            answer = await post_chunk(web, token, chunk, 16000, key="chunk-1")
            assert answer.status_code == 200
        finally:
            proc.send_signal(signal.SIGKILL)  # the moment the chunk was acknowledged
            proc.wait(10)

        proc = _serve(tmp_path, fake_llm, port)
        try:
            await _up(proc, web, tmp_path)
            # Omi's retry of the same chunk reaches the restarted process.
            retry = await post_chunk(web, token, chunk, 16000, key="chunk-1")
            assert retry.status_code == 200 and retry.json() == {"result": "duplicate"}
            async with asyncio.timeout(90):
                while not await stored():
                    assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                    await asyncio.sleep(0.2)
            # Past the idle timeout and another transcription: nothing else arrives.
            await asyncio.sleep(2)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

    assert len(await stored()) == 1
