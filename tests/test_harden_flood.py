"""Hardening (#18) item 4, (#29) item 1: idle unauthenticated sockets cannot lock real pendants
out; the oldest silent one makes room for a newcomer (``bot/device/gate.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

from bot.app.build import App
from bot.device import protocol as p
from tests.support.device import _closed, _frame, _open, add_device, running_device


async def test_idle_sockets_beyond_the_cap_make_room_and_a_real_device_still_connects(
    app: App,
) -> None:
    _, token = await add_device(app, "pendant-f")
    async with (
        running_device(app, max_unauthenticated_per_address=3) as dev,
        contextlib.AsyncExitStack() as stack,
    ):
        # A flood holding sockets open without ever authenticating: one address's slots full.
        idle = [await stack.enter_async_context(_open(dev)) for _ in range(3)]
        start = time.monotonic()
        await stack.enter_async_context(_open(dev))
        code, _ = await _closed(idle[0])
        assert code == 1006  # the oldest silent socket is dropped (no closing handshake)
        assert time.monotonic() - start < 1.5  # at once, not after the auth window

        async with _open(dev, token) as ws:  # the owner's pendant is not locked out
            await ws.send(json.dumps({"type": "hello"}))
            assert (await _frame(ws))["type"] == "ready"
    assert dev.adapter.server.gate.refusals.total == 2  # counted, not logged one by one


async def test_the_auth_window_is_short(app: App) -> None:
    async with running_device(app) as dev, _open(dev) as ws:
        start = time.monotonic()
        code, _ = await asyncio.wait_for(_closed(ws), 10)
    assert code == p.CLOSE_UNAUTHORIZED
    assert time.monotonic() - start < 3.5
