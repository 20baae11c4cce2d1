"""Hardening (#18) item 5: kill -9 during a turn loses nothing.

A real ``lifebot serve`` subprocess talks to the loopback Telegram; it is killed with SIGKILL
while the model is thinking. The next start offers the message for /retry, exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from bot.app.build import start_channels
from tests.fakes.llm import FakeLLM, Step, hang, say
from tests.fakes.telegram_api import BOT_ID, TOKEN, FakeTelegram
from tests.support.app import AppFactory, add_user
from tests.support.serve import spawn_serve
from tests.support.telegram import CHAT

ROOT = Path(__file__).resolve().parent.parent


def _telegram(tg: FakeTelegram) -> dict[str, Any]:
    return {
        "telegram_bot_token": TOKEN,
        "telegram_api_url": tg.api_url,
        "telegram_poll_timeout": 1,
        "telegram_retries": 2,
        "jobs_enabled": False,
    }


def _serve(tmp_path: Path, tg: FakeTelegram, llm: FakeLLM) -> subprocess.Popen[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LIFEBOT_", "OPENAI_", "TELEGRAM_"))
    }
    env.update(
        LIFEBOT_DATA_DIR=str(tmp_path / "data"),
        LIFEBOT_LLM_MODEL="fake-smart",
        LIFEBOT_LLM_FAST_MODEL="fake-fast",
        OPENAI_BASE_URL=llm.url,
        OPENAI_API_KEY="k",
        TELEGRAM_BOT_TOKEN=TOKEN,
        LIFEBOT_TELEGRAM_API_URL=tg.api_url,
        LIFEBOT_TELEGRAM_POLL_TIMEOUT="1",
        LIFEBOT_JOBS_ENABLED="false",
        PYTHONPATH=str(ROOT),
    )
    return spawn_serve(tmp_path, env)


async def test_a_message_whose_turn_was_killed_is_offered_for_retry_once(
    app_factory: AppFactory, fake_llm: FakeLLM, tg: FakeTelegram, tmp_path: Path
) -> None:
    setup = await app_factory(fake_llm, **_telegram(tg))
    await add_user(setup, str(CHAT), channel_name="telegram", account=str(BOT_ID), name="Ana")

    def thinking(body: dict[str, Any]) -> Step:
        return hang(8) if body.get("model") == "fake-smart" else say('{"route": "chat"}')

    fake_llm.default = thinking
    proc = _serve(tmp_path, tg, fake_llm)
    try:
        await tg.send_text(CHAT, "what is on my calendar this week?")
        async with asyncio.timeout(60):
            while not any(r.get("model") == "fake-smart" for r in fake_llm.chat_requests):
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                await asyncio.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert tg.texts(CHAT) == []  # killed mid-turn: no answer went out

    for _restart in range(2):  # two restarts: the note comes once
        app = await app_factory(fake_llm, **_telegram(tg))
        assert await start_channels(app) == ["telegram"]
        await asyncio.sleep(0.5)
        for adapter in app.started:
            await adapter.stop()
    [note] = tg.texts(CHAT)
    assert "restarted" in note and "what is on my calendar this week?" in note

    fake_llm.default = lambda body: (
        say("Only the dentist on Thursday.")
        if body.get("model") == "fake-smart"
        else say('{"route": "chat"}')
    )
    app = await app_factory(fake_llm, **_telegram(tg))
    await start_channels(app)
    try:
        await tg.send_text(CHAT, "/retry")
        assert (await tg.wait_texts(CHAT, 2, within=30))[-1] == "Only the dentist on Thursday."
    finally:
        for adapter in app.started:
            await adapter.stop()
