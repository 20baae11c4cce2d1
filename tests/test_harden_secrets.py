"""Hardening (#18) items 11 and 12: no secret in any log line, private files, and a pendant-only
``serve`` logs at the level asked for. Real ``lifebot serve`` subprocesses."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.app.build import start_channels
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import TOKEN, FakeTelegram
from tests.support.app import AppFactory
from tests.support.env import process_env


async def _serve_until(
    tmp_path: Path, ready: Callable[[str], bool], limit: float = 90, **env: str
) -> str:
    """Run `lifebot serve` until ``ready(stderr so far)`` (or ``limit`` s), then SIGTERM; stderr.

    Waiting for the condition rather than a fixed time keeps the test honest on a loaded
    machine, where start-up (model loading, migrations) can take longer than usual.
    """
    # The web page on a port the OS picks, never 8700.
    clean = process_env(tmp_path, **{"LIFEBOT_JOBS_ENABLED": "false", **env})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "serve",
        cwd=tmp_path,
        env=clean,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    seen = bytearray()

    async def read_until_ready() -> None:
        assert proc.stderr is not None
        while not ready(seen.decode(errors="replace")):
            chunk = await proc.stderr.read(4096)
            if not chunk:  # the process ended
                return
            seen.extend(chunk)

    try:
        await asyncio.wait_for(read_until_ready(), limit)
    except TimeoutError:
        pass  # the assertions below say what was missing
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(proc.communicate(), 30)
    return (bytes(seen) + rest).decode(errors="replace")


async def test_debug_logs_carry_no_token_and_the_data_is_private(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    err = await _serve_until(
        tmp_path,
        # Two polls: the first proves start-up, the second that DEBUG lines kept flowing.
        lambda _: len(tg.calls_to("getUpdates")) >= 2,
        TELEGRAM_BOT_TOKEN=TOKEN,
        LIFEBOT_TELEGRAM_API_URL=tg.api_url,
        LIFEBOT_TELEGRAM_POLL_TIMEOUT="1",
        LIFEBOT_LOG_LEVEL="DEBUG",
    )

    assert tg.calls_to("getUpdates"), err[-2000:]
    assert " DEBUG " in err  # the libraries did log at DEBUG...
    assert TOKEN not in err  # ...but never the token
    assert TOKEN.split(":")[1] not in err
    data = tmp_path / "data"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for f in data.glob("*.db*"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


async def test_a_pendant_only_serve_logs_at_info(tmp_path: Path) -> None:
    err = await _serve_until(
        tmp_path,
        lambda err: "lifebot is running: device" in err,
        LIFEBOT_DEVICE_ENABLED="true",
        LIFEBOT_DEVICE_HOST="127.0.0.1",
        LIFEBOT_DEVICE_PORT="0",
        LIFEBOT_LOG_LEVEL="INFO",
        LIFEBOT_STT_THREADS="1",
    )

    assert "lifebot is running: device" in err, err[-2000:]


async def test_a_malformed_webhook_update_gets_200_and_one_log_line(
    tg: FakeTelegram, app_factory: AppFactory, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = await app_factory(
        fake_llm,
        telegram_bot_token=TOKEN,
        telegram_api_url=tg.api_url,
        telegram_webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        telegram_webhook_secret="right-secret",
        telegram_webhook_port=port,
        jobs_enabled=False,
    )
    await start_channels(app)
    try:
        caplog.clear()
        bad = {"update_id": 7, "message": {"message_id": "x", "chat": 5, "date": "never"}}
        assert await tg.post_webhook(bad, "right-secret") == 200
        lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(lines) == 1 and lines[0].exc_info is None, lines
    finally:
        for adapter in app.started:
            await adapter.stop()
