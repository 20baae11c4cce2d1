"""Hardening (#29): a revoked pendant's socket is closed within 2 s, idle or not, on whichever
process holds it. ``lifebot device revoke`` (or the web page's Revoke) runs elsewhere; an idle
pendant sends nothing, so a check per received frame never saw it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import col, select
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bot.app.build import App, start_push_handover
from bot.device import protocol as p
from storage.db import Database
from storage.models import Device
from storage.repos.devices import DeviceRepo
from tests.support.app import AppFactory
from tests.support.cli import run_cli
from tests.support.device import _frame, add_device, running_device
from tests.support.env import process_env
from tests.support.serve import free_port, spawn_serve
from tests.support.web import client_for, sign_in

LIMIT = 2.0
"""What README and the CLI promise: closed within this many seconds of the revoke."""
WELL_BEFORE_THE_POLL = 10.0
"""With the poll an hour away, a close within this many seconds can only be the notification's.

Wider than ``LIMIT`` on purpose: on a loaded machine (CI beside other test runs) the revoking
CLI's commit and the notification's delivery took 2.7 s once; what this test proves is *which*
path closed the socket, and the 2 s promise is checked by the tests above on both databases.
"""


class Idle:
    """A pendant that said hello and then sends nothing; notes when its socket closes."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.closed_at: datetime | None = None
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for _ in self.ws:
                pass
        self.closed_at = datetime.now(UTC)
        self.closed.set()

    async def wait_closed(self, seconds: float = 10.0) -> tuple[int | None, str]:
        """The close code and reason (fails if still open after ``seconds``)."""
        await asyncio.wait_for(self.closed.wait(), seconds)
        return self.ws.close_code, self.ws.close_reason or ""


@asynccontextmanager
async def idle_pendant(url: str, token: str) -> AsyncIterator[Idle]:
    """Connect, hello, ``ready``, then stay silent (no pings from the client either)."""
    async with connect(
        url, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None, ping_interval=None
    ) as ws:
        await ws.send(json.dumps({"type": "hello"}))
        await _frame(ws, "ready")
        yield Idle(ws)


async def revoked_at(db: Database, name: str) -> datetime:
    """When the device was revoked, as stored (the revoking process's clock)."""
    async with db.session() as s:  # the newest device of that name (by_name: live ones only)
        query = select(Device).where(Device.name == name).order_by(col(Device.id).desc())
        device = (await s.exec(query)).first()
    assert device is not None and device.revoked_at is not None
    return device.revoked_at.replace(tzinfo=UTC)


def cli_env(app: App) -> dict[str, str]:
    """What makes the CLI use the app's data and database."""
    return {
        "LIFEBOT_DATA_DIR": str(app.settings.data_dir),
        "LIFEBOT_DATABASE_URL": app.settings.database_url,
    }


async def _closed_after_revoke(pendant: Idle, app: App, name: str) -> float:
    code, reason = await pendant.wait_closed()
    assert code == p.CLOSE_UNAUTHORIZED and "revoked" in reason
    assert pendant.closed_at is not None
    return (pendant.closed_at - await revoked_at(app.db, name)).total_seconds()


async def test_an_idle_pendant_is_closed_within_2_s_of_the_cli_revoke(
    any_db_app: App, tmp_path: Path
) -> None:
    app = any_db_app
    await add_device(app, "idle-1")
    _, token = await add_device(app, "idle-2")
    async with running_device(app) as dev, idle_pendant(dev.url, token) as pendant:
        await asyncio.sleep(1.5)  # idle for a while: nothing arrives to trigger a check
        code, out, err = await run_cli("device", "revoke", "idle-2", cwd=tmp_path, env=cli_env(app))
        assert code == 0, err
        assert "within 2 seconds" in out
        seconds = await _closed_after_revoke(pendant, app, "idle-2")
    print(f"idle pendant closed {seconds:.2f} s after the revoke")
    assert seconds < LIMIT


async def test_the_web_pages_revoke_closes_an_idle_pendant_within_2_s(app: App) -> None:
    user, token = await add_device(app, "idle-web")
    async with app.db.session() as s:
        device = await DeviceRepo(s).by_name("idle-web")
    assert device is not None
    async with running_device(app) as dev, idle_pendant(dev.url, token) as pendant:
        async with client_for(app) as client:
            csrf = await sign_in(app, client, user)
            await asyncio.sleep(1.2)
            answer = await client.post(f"/devices/{device.id}/revoke", data={"csrf": csrf})
            assert answer.status_code == 303
        seconds = await _closed_after_revoke(pendant, app, "idle-web")
    assert seconds < LIMIT


@pytest.mark.postgres
async def test_on_postgresql_a_notification_closes_it_without_waiting_for_the_poll(
    app_factory: AppFactory, migrated_postgres_url: str, tmp_path: Path
) -> None:
    app = await app_factory(database_url_setting=migrated_postgres_url)
    _, token = await add_device(app, "idle-pg")
    # The poll is off (an hour): only the notification from the revoking process can close it.
    async with running_device(app, revoke_check_seconds=3600.0) as dev:
        await start_push_handover(app, dev.adapter.server.revoked)
        async with idle_pendant(dev.url, token) as pendant:
            code, _, err = await run_cli(
                "device", "revoke", "idle-pg", cwd=tmp_path, env=cli_env(app)
            )
            assert code == 0, err
            seconds = await _closed_after_revoke(pendant, app, "idle-pg")
    print(f"closed by the notification {seconds:.2f} s after the revoke")
    assert seconds < WELL_BEFORE_THE_POLL


def _serve_on(postgres_url: str, tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = process_env(
        LIFEBOT_DATA_DIR=str(tmp_path / "serve-data"),
        LIFEBOT_DATABASE_URL=postgres_url,
        LIFEBOT_DEVICE_HOST="127.0.0.1",
        LIFEBOT_DEVICE_PORT=str(port),
        LIFEBOT_STT_THREADS="1",
        LIFEBOT_JOBS_ENABLED="false",
        LIFEBOT_WEB_ENABLED="false",
    )
    return spawn_serve(tmp_path, env)


@pytest.mark.postgres
async def test_on_postgresql_the_serve_process_holding_the_socket_closes_it(
    app_factory: AppFactory, migrated_postgres_url: str, tmp_path: Path
) -> None:
    postgres_url = migrated_postgres_url
    app = await app_factory(database_url_setting=postgres_url)
    _, token = await add_device(app, "idle-far")
    port = free_port()
    proc = _serve_on(postgres_url, tmp_path, port)
    url = f"ws://127.0.0.1:{port}/v1/device"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                async with idle_pendant(url, token) as pendant:
                    await asyncio.sleep(1.5)
                    code, _, err = await run_cli(
                        "device", "revoke", "idle-far", cwd=tmp_path, env=cli_env(app)
                    )
                    assert code == 0, err
                    seconds = await _closed_after_revoke(pendant, app, "idle-far")
                break
            except ConnectionRefusedError:  # not listening yet (TimeoutError is an OSError too)
                assert time.monotonic() < deadline, "serve never listened"
                await asyncio.sleep(0.3)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    print(f"closed by the serve process {seconds:.2f} s after the revoke")
    assert seconds < LIMIT
