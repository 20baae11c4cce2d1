"""A push that waits for an offline pendant reaches it the moment the pendant is back."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from storage.models import Reminder
from storage.repos.reminders import ReminderRepo
from tests.fakes.clock import ManualClock
from tests.support.device import add_device, running_device
from tests.support.jobs import deliveries, jobs_app, jobs_of

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


async def test_a_waiting_reminder_is_sent_as_soon_as_the_pendant_says_hello(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)  # stands still: no retry of the outbox can come in between
    async with jobs_app(tmp_path, clock) as app:
        user, token = await add_device(app, "pendant-w")
        async with app.db.session() as s:
            await ReminderRepo(s).add(Reminder(user_id=user.id or 0, text="pills", next_at=NOW))
        async with running_device(app) as dev:
            await jobs_of(app).plan_and_send(clock.now())  # due: the pendant is not connected
            [waiting] = await deliveries(app, "reminder")
            headers = {"Authorization": f"Bearer {token}"}
            async with connect(dev.url, additional_headers=headers, proxy=None) as ws:
                hello = {"type": "hello", "codec": "pcm16", "sample_rate": 16000, "mode": "ask"}
                await ws.send(json.dumps(hello))
                frames: list[dict[str, Any]] = []
                async with asyncio.timeout(10):
                    while not frames or frames[-1]["type"] != "reply":
                        frames.append(json.loads(await ws.recv()))
            for _ in range(100):  # its receipt is stored just after the frame went out
                [row] = await deliveries(app, "reminder")
                if row.status != "sending":
                    break
                await asyncio.sleep(0.05)

    assert waiting.status == "pending" and (waiting.last_error or "").startswith("waiting:")
    assert [f["type"] for f in frames] == ["ready", "reply"]  # after ``ready``, not before
    assert (frames[-1]["kind"], frames[-1]["text"]) == ("reminder", "⏰ Reminder: pills")
    assert (row.status, row.channel) == ("delivered", "device")
