"""Hardening (#18) item 5: kill -9 during a turn, or while a reminder goes out, loses nothing.

A real ``lifebot serve`` subprocess talks to the loopback Telegram; it is killed with SIGKILL
while the model is thinking. The next start offers the message for /retry, exactly once. And
killed while Telegram holds a reminder's send, the next start tells the user the reminder.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from bot.app.build import start_channels
from storage.models import Delivery, Reminder
from storage.repos.reminders import ReminderRepo
from tests.fakes.llm import FakeLLM, Step, hang, say
from tests.fakes.telegram_api import BOT_ID, TOKEN, FakeTelegram
from tests.support.app import AppFactory, add_user
from tests.support.serve import spawn_serve, telegram_serve_env
from tests.support.telegram import CHAT


def _telegram(tg: FakeTelegram) -> dict[str, Any]:
    return {
        "telegram_bot_token": TOKEN,
        "telegram_api_url": tg.api_url,
        "telegram_poll_timeout": 1,
        "telegram_retries": 2,
        "jobs_enabled": False,
    }


def _serve(
    tmp_path: Path, tg: FakeTelegram, llm: FakeLLM, *, jobs: bool = False
) -> subprocess.Popen[bytes]:
    env = telegram_serve_env(
        tmp_path,
        llm,
        tg,
        LIFEBOT_TELEGRAM_POLL_TIMEOUT="1",
        LIFEBOT_JOBS_ENABLED="true" if jobs else "false",
        # A killed leader's lease must run out before the restarted process leads: a short
        # lease (not what these tests are about) keeps that wait to about 2 s, not 10.
        LIFEBOT_JOBS_LEASE_SECONDS="1.5",
        LIFEBOT_JOBS_HEARTBEAT="0.5",
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


@pytest.mark.slow
async def test_a_reminder_whose_send_was_killed_reaches_the_user_after_the_restart(
    app_factory: AppFactory, fake_llm: FakeLLM, tg: FakeTelegram, tmp_path: Path
) -> None:
    """SIGKILL while Telegram holds the reminder's sendMessage (it never took it): after the
    restart the user gets the reminder, once, saying it may repeat one they already saw."""
    setup = await app_factory(fake_llm, **_telegram(tg))
    user = await add_user(setup, str(CHAT), channel_name="telegram", account=str(BOT_ID))
    assert user.id is not None
    async with setup.db.session() as s:
        await ReminderRepo(s).add(
            Reminder(
                user_id=user.id,
                text="take the pills",
                next_at=datetime.now(UTC) + timedelta(seconds=1),
            )
        )

    def sending() -> bool:
        return any("take the pills" in str(c.params) for c in tg.calls_to("sendMessage"))

    tg.stall("sendMessage")
    proc = _serve(tmp_path, tg, fake_llm, jobs=True)
    try:
        await tg.wait_for(sending, within=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    tg.release("sendMessage")
    async with setup.db.session() as s:
        [row] = (await s.exec(select(Delivery).where(Delivery.kind == "reminder"))).all()
        assert row.status == "sending" and row.claimed_at is not None
        # The restart comes a minute later: past the wait for a slow old leader's last sends.
        row.claimed_at -= timedelta(minutes=1)
        s.add(row)

    proc = _serve(tmp_path, tg, fake_llm, jobs=True)
    try:
        await tg.wait_for(lambda: len(tg.texts(CHAT)) >= 1, within=60)
        await asyncio.sleep(2)  # time for a duplicate to show up, if there were one
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert tg.texts(CHAT) == [
        "In case this did not reach you (I was restarting as it went out): "
        "⏰ Reminder: take the pills"
    ]
