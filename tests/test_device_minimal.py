"""Minimal mode (issue 23): the ≤50-line example client in docs/ runs against the real server:
token in the URL, ``start``, 20 ms PCM16 frames, ``end``; it prints the transcript and reply."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.llm import FakeLLM, say
from tests.support.app import AppFactory
from tests.support.device import add_device, running_device
from tests.support.speech import speak

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "minimal_client.py"


def test_the_example_client_is_at_most_50_lines() -> None:
    assert len(EXAMPLE.read_text().splitlines()) <= 50


async def _run(url: str, wav: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        url,
        str(wav),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode or 0, out.decode()


async def test_the_example_client_asks_and_prints_the_answer(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm)
    _, token = await add_device(app, "esp32")
    fake_llm.default = lambda body: say("The dentist is at nine.")
    clip = speak("What is on my calendar tomorrow morning", tmp_path / "q.wav")

    async with running_device(app) as dev:
        code, out = await _run(f"{dev.url}?token={token}", clip)
        wrong, refused = await _run(f"{dev.url}?token=lbd_wrong", clip)

    assert code == 0, out
    heard, reply = out.strip().splitlines()
    assert "calendar" in heard.lower()
    assert reply == "reply: The dentist is at nine."
    assert wrong != 0 and "4401" in refused  # a wrong token in the URL is refused too
