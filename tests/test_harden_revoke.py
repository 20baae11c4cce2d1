"""Hardening (#18) item 6: a revoked pendant stops at once; nothing it sends is stored.

`lifebot device revoke` runs in another process, so the server only sees the database change.
"""

from __future__ import annotations

import asyncio
import json

from sqlmodel import select

from bot.app.build import App
from bot.device import protocol as p
from storage.models import Message, PairingRequest
from storage.repos.devices import DeviceRepo
from tests.fakes.llm import FakeLLM, say
from tests.support.device import _closed, _frame, _open, add_device, running_device


async def test_a_revoked_device_is_closed_and_its_text_frame_is_not_stored(
    app: App, fake_llm: FakeLLM
) -> None:
    fake_llm.default = lambda _body: say("ok")
    _, token = await add_device(app, "pendant-r")
    async with running_device(app) as dev, _open(dev, token) as ws:  # default check interval
        await ws.send(json.dumps({"type": "hello"}))
        await _frame(ws, "ready")
        async with app.db.session() as s:
            await DeviceRepo(s).revoke("pendant-r", app.clock.now())
        await ws.send(json.dumps({"type": "text", "text": "wire 5000 EUR to Bob", "id": "t1"}))
        code, reason = await asyncio.wait_for(_closed(ws), 5)
        await asyncio.sleep(0.5)  # anything queued would have been handled by now

    assert code == p.CLOSE_UNAUTHORIZED and "revoked" in reason
    async with app.db.session() as s:
        assert (await s.exec(select(Message).where(Message.channel == "device"))).all() == []
        assert (await s.exec(select(PairingRequest))).all() == []
    assert fake_llm.requests == []
