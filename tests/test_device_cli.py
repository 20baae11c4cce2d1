"""``lifebot device add|revoke|status`` and ``lifebot device-sim``, as an operator runs them."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.app.build import App, build_app, start_app, start_device_channel
from bot.app.cli import app as cli
from storage.models import Device
from storage.repos.devices import hash_token
from storage.repos.users import UserRepo
from tests.support.app import AppFactory, make_settings
from tests.support.cli import run_cli
from tests.support.device import add_device, running_device
from tests.support.speech import speak

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("LIFEBOT_DATA_DIR", str(data))
    monkeypatch.setenv("LIFEBOT_DEVICE_PORT", "18999")

    async def make_user() -> None:
        application = build_app(make_settings(tmp_path))
        await start_app(application)
        async with application.db.session() as s:
            await UserRepo(s).create("alice")
        await application.close()

    asyncio.run(make_user())
    return data


def _devices(data: Path) -> list[Device]:
    async def read() -> list[Device]:
        application = build_app(make_settings(data.parent))
        try:
            from storage.repos.devices import DeviceRepo

            async with application.db.session() as s:
                return await DeviceRepo(s).all()
        finally:
            await application.close()

    return asyncio.run(read())


def test_add_prints_the_token_once_and_stores_only_its_hash(cli_env: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["device", "add", "kitchen", "--user", "alice"])
    assert out.exit_code == 0, out.output
    token = re.search(r"lbd_[A-Za-z0-9_-]+", out.output)
    assert token is not None
    assert "ws://127.0.0.1:18999/v1/device" in out.output
    (device,) = _devices(cli_env)
    assert device.token_hash == hash_token(token.group())
    assert token.group() not in (cli_env / "lifebot.db").read_bytes().decode("latin-1")

    again = runner.invoke(cli, ["device", "add", "kitchen", "--user", "alice"])
    assert again.exit_code == 1 and "already exists" in again.output
    nobody = runner.invoke(cli, ["device", "add", "hall", "--user", "bob"])
    assert nobody.exit_code == 2 and "no user 'bob'" in nobody.output
    bad = runner.invoke(cli, ["device", "add", "two words", "--user", "alice"])
    assert bad.exit_code == 2

    status = runner.invoke(cli, ["device", "status"])
    assert status.exit_code == 0
    assert "kitchen  user=alice  active  last seen never  waiting: 0.0 s" in status.output

    revoked = runner.invoke(cli, ["device", "revoke", "kitchen"])
    assert revoked.exit_code == 0 and "Revoked kitchen" in revoked.output
    assert "revoked" in runner.invoke(cli, ["device", "status"]).output
    assert runner.invoke(cli, ["device", "revoke", "kitchen"]).exit_code == 1


async def test_serve_starts_the_pendant_server_only_when_a_device_exists(
    app_factory: AppFactory,
) -> None:
    app = await app_factory(device_port=0)
    assert await start_device_channel(app) is False
    assert "device" not in app.dispatcher.adapters
    await add_device(app, "pendant-s")
    assert await start_device_channel(app) is True
    assert "device" in app.dispatcher.adapters

    enabled = await app_factory(device_port=0, device_enabled=True)
    assert await start_device_channel(enabled) is True


async def test_device_sim_streams_a_wav_and_prints_what_comes_back(
    app: App, tmp_path: Path
) -> None:
    _, token = await add_device(app, "pendant-cli")
    clip = speak("Pick up the laundry after work", tmp_path / "c.wav")
    async with running_device(app) as dev:
        code, text, err = await run_cli(
            "device-sim",
            str(clip),
            "--token",
            token,
            "--url",
            dev.url,
            "--mode",
            "ambient",
            cwd=tmp_path,
        )
    assert code == 0, err
    assert "ready: session" in text
    assert re.search(r"transcript \[[0-9.]+-[0-9.]+ s\]: .*laundry", text, re.IGNORECASE)
