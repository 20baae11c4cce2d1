"""The web page as `lifebot serve` runs it: a real socket, a clear error for a taken port,
and `lifebot web login`."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from bot.app.build import start_channels
from bot.errors import ConfigError
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory
from tests.support.cli import run_cli


async def test_serve_starts_the_web_page_and_close_stops_it(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    application = await app_factory(fake_llm, web_enabled=True, web_port=0, jobs_enabled=False)
    await start_channels(application)
    port = application.web.server.bound_port
    async with httpx.AsyncClient() as client:
        alive = await client.get(f"http://127.0.0.1:{port}/healthz")
        assert alive.json() == {"status": "ok"}
        ready = await client.get(f"http://127.0.0.1:{port}/readyz")
        assert ready.status_code == 200, ready.text  # jobs off here: no leader is expected
        page = await client.get(f"http://127.0.0.1:{port}/", follow_redirects=True)
        assert "send <code>/web</code>" in page.text.lower()
        assert page.headers["x-frame-options"] == "DENY"
    await application.web.stop()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/healthz")


async def test_a_taken_port_is_a_clear_error(app_factory: AppFactory, fake_llm: FakeLLM) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        application = await app_factory(fake_llm, web_port=port)
        with pytest.raises(ConfigError, match="LIFEBOT_WEB_PORT"):
            await application.web.start()


async def test_web_login_prints_a_one_time_link(tmp_path: Path) -> None:
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "d"), "LIFEBOT_WEB_PUBLIC_URL": "https://lb.example"}
    code, _, err = await run_cli("chat", cwd=tmp_path, env=env, stdin="/quit\n")
    assert code == 0, err
    code, out, err = await run_cli("web", "login", "--user", "1", cwd=tmp_path, env=env)
    assert code == 0, err
    assert "https://lb.example/login/" in out
    code, _, err = await run_cli("web", "login", "--user", "nobody", cwd=tmp_path, env=env)
    assert code == 2  # as every command that takes a user
    assert "no user 'nobody'" in err
