"""Helpers for the pendant tests: add a device, run the real WebSocket server on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bot.app.build import App, build_device_adapter
from bot.device.adapter import DeviceAdapter
from bot.device.sim import SimResult, simulate
from bot.speech.transcribe import Transcriber
from storage.models import User
from storage.repos.devices import DeviceRepo
from storage.repos.users import UserRepo
from tests.support.speech import shared_transcriber


async def add_device(application: App, name: str, user: User | None = None) -> tuple[User, str]:
    """A user (new unless given) with a registered pendant; returns the user and the token."""
    async with application.db.session() as s:
        if user is None:
            user = await UserRepo(s).create(f"owner of {name}")
        assert user.id is not None
        _, token = await DeviceRepo(s).add(user.id, name)
    return user, token


@dataclass
class Running:
    """A started pendant channel."""

    app: App
    adapter: DeviceAdapter

    @property
    def url(self) -> str:
        """Where devices connect."""
        return f"ws://127.0.0.1:{self.adapter.server.bound_port}/v1/device"

    async def sim(self, wav: Path, token: str, **kwargs: Any) -> SimResult:
        """Stream a WAV like a pendant would."""
        kwargs.setdefault("wait_seconds", 60.0)
        return await simulate(wav, token=token, url=self.url, **kwargs)


@asynccontextmanager
async def running_device(
    application: App, transcriber: Transcriber | None = None, **options: Any
) -> AsyncIterator[Running]:
    """The device channel on a free port, wired to the app's dispatcher.

    ``options`` override DeviceOptions fields that are not settings (check intervals).
    """
    adapter = build_device_adapter(application, transcriber=transcriber or shared_transcriber())
    if options:
        adapter.hub.options = dataclasses.replace(adapter.hub.options, **options)
    adapter.server.port = 0
    application.dispatcher.register(adapter)
    await adapter.start(application.dispatcher.handle)
    try:
        yield Running(application, adapter)
    finally:
        await adapter.stop()


async def eventually(check: Callable[[], bool], seconds: float = 30.0) -> None:
    """Wait until ``check()`` holds (state another task changes), or fail."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition never came true")


def _open(dev: Running, token: str | None = None, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(dev.url, additional_headers=headers, proxy=None, **kwargs)


async def _frame(ws: ClientConnection, kind: str | None = None) -> dict[str, Any]:
    """The next frame (of ``kind``, skipping others)."""
    async with asyncio.timeout(30):
        while True:
            data: dict[str, Any] = json.loads(await ws.recv())
            if kind is None or data["type"] == kind:
                return data


async def _closed(ws: ClientConnection) -> tuple[int | None, str]:
    """Read until the server closes; the close code and reason."""
    with contextlib.suppress(ConnectionClosed):
        async with asyncio.timeout(10):
            async for _ in ws:
                pass
    return ws.close_code, ws.close_reason or ""
