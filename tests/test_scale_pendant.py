"""A pendant connected to one of several real ``lifebot serve`` processes (issue 22).

Three processes share one PostgreSQL database; the leader runs the jobs, the pendant is
connected to another process. A reminder must reach the pendant through the process that holds
its socket, once and on time. With the pendant offline the reminder waits for it for
``LIFEBOT_PUSH_AWAY_REMINDER_SECONDS`` and then goes to the user's Telegram chat, once. A
pendant that comes back (to a third process) while its reminder waits gets it at once. Last, a
process that *was* the leader (frozen, replaced, thawed) and now holds the pendant must still
be handed its pushes. Every reminder is stored once in the user's history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlmodel import col, select
from websockets.asyncio.client import ClientConnection, connect

from storage.db import Database
from storage.models import Delivery, Message, Reminder
from storage.repos.reminders import ReminderRepo
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, Step, say
from tests.fakes.telegram_api import BOT_ID, FakeTelegram
from tests.support.cli import run_cli
from tests.support.serve import Cluster, free_port, leader_pid, new_leader, serve_env

pytestmark = pytest.mark.postgres

CHAT = 7001
"""Ana's Telegram chat."""
AWAY_SECONDS = 3
"""LIFEBOT_PUSH_AWAY_REMINDER_SECONDS in this test: how long a reminder waits for the pendant.

Long enough for ``lifebot jobs`` to see the push waiting (b) and for the pendant to come back
well before the deadline (c); shorter than the outbox's own 5 s second look (``AWAY_RETRY``),
so the look at the deadline is the only other one, 2+ s after c's reconnect: "at once" stays
distinguishable from "at the next look"."""
LATE_LIMIT = 5.0
"""A reminder for a connected pendant arrives within this many seconds of its due time."""
LOST = "lost the scheduler lock"
"""What a leader's log says when it finds another process took its lease."""


def _model(body: dict[str, Any]) -> Step:
    """No turn here needs the model; memory's background pass gets an empty answer."""
    del body
    return say("{}")


@dataclass
class Pendant:
    """A pendant's WebSocket: every frame it receives, with the time it arrived."""

    ws: ClientConnection
    frames: list[tuple[datetime, dict[str, Any]]] = field(default_factory=list)
    got: asyncio.Event = field(default_factory=asyncio.Event)

    def pushes(self, kind: str = "reminder") -> list[tuple[datetime, str]]:
        """(arrival, text) of each ``reply`` frame of ``kind``."""
        return [
            (at, str(f["text"]))
            for at, f in self.frames
            if f["type"] == "reply" and f.get("kind") == kind
        ]

    async def read(self) -> None:
        """Collect frames until the socket closes."""
        with contextlib.suppress(Exception):
            async for raw in self.ws:
                if isinstance(raw, str):
                    self.frames.append((datetime.now(UTC), json.loads(raw)))
                    self.got.set()

    async def wait_push(self, text: str, within: float) -> datetime:
        """When the push with ``text`` arrived (fails after ``within`` seconds)."""
        async with asyncio.timeout(within):
            while True:
                for at, got in self.pushes():
                    if got == text:
                        return at
                self.got.clear()
                await self.got.wait()


@asynccontextmanager
async def pendant(port: int, token: str) -> AsyncIterator[Pendant]:
    """Connect as a pendant (header auth, ``hello``), read frames in the background."""
    url = f"ws://127.0.0.1:{port}/v1/device"
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url, additional_headers=headers, proxy=None) as ws:
        hello = {"type": "hello", "codec": "pcm16", "sample_rate": 16000, "mode": "ask"}
        await ws.send(json.dumps(hello))
        async with asyncio.timeout(15):
            ready = json.loads(await ws.recv())
        assert ready["type"] == "ready", ready
        device = Pendant(ws)
        reader = asyncio.create_task(device.read())
        try:
            yield device
        finally:
            await ws.close()
            await reader


async def _remind(db: Database, user_id: int, text: str, due: datetime) -> None:
    async with db.session() as s:
        await ReminderRepo(s).add(Reminder(user_id=user_id, text=text, next_at=due))


async def _delivery(db: Database, text: str) -> Delivery:
    """The reminder's outbox row once it is settled (its receipt follows the send closely)."""
    for _ in range(50):
        async with db.session() as s:
            rows = (await s.exec(select(Delivery).where(Delivery.kind == "reminder"))).all()
        [row] = [r for r in rows if text in str((r.payload or {}).get("text"))]
        if row.status not in ("pending", "sending"):
            break
        await asyncio.sleep(0.1)
    return row


async def _arrival(tg: FakeTelegram, text: str) -> datetime:
    """When ``text`` reached Ana's Telegram chat."""
    await tg.wait_for(lambda: text in tg.texts(CHAT), within=30)
    return datetime.now(UTC)


async def _until_waiting(db: Database, text: str) -> None:
    """Return once the reminder's push waits for the pendant (it was due and found it away)."""
    for _ in range(100):
        async with db.session() as s:
            rows = (await s.exec(select(Delivery).where(Delivery.kind == "reminder"))).all()
        if any(
            text in str((r.payload or {}).get("text")) and (r.last_error or "").startswith("wait")
            for r in rows
        ):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the reminder {text!r} never waited for the pendant")


async def _stored(db: Database, text: str) -> int:
    """How many messages in the user's history hold ``text``."""
    async with db.session() as s:
        rows = (await s.exec(select(Message).where(col(Message.text).contains(text)))).all()
    return len(rows)


@pytest.mark.slow
async def test_a_pendant_on_a_non_leader_gets_its_reminders_and_telegram_gets_them_when_it_is_away(
    tmp_path: Path, migrated_postgres_url: str, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    # A database at the newest schema: three processes migrating an empty one together is
    # tests/test_scale_processes.py's start; here it only delayed the pendant's story.
    postgres_url = migrated_postgres_url
    fake_llm.default = _model
    device_ports = [free_port() for _ in range(3)]
    env = serve_env(
        postgres_url,
        fake_llm,
        tg,
        LIFEBOT_DEVICE_ENABLED="true",
        LIFEBOT_DEVICE_HOST="127.0.0.1",
        LIFEBOT_PUSH_AWAY_REMINDER_SECONDS=str(AWAY_SECONDS),
        LIFEBOT_JOBS_HEARTBEAT="1",
        LIFEBOT_JOBS_LEASE_SECONDS="3",
    )
    cluster = Cluster(tmp_path, env)
    db = Database(postgres_url)
    figures: dict[str, Any] = {}
    started = time.monotonic()
    try:
        await cluster.start(3, lambda i: {"LIFEBOT_DEVICE_PORT": str(device_ports[i])})
        await cluster.wait_listening()
        await cluster.wait_listening(ports=device_ports)
        await tg.wait_for(lambda: len(tg.calls_to("setWebhook")) >= 3, within=30)
        figures["3 processes up (s)"] = round(time.monotonic() - started, 1)
        async with db.session() as s:
            user, _ = await UserRepo(s).create_with_identity(
                "ana", "telegram", str(BOT_ID), str(CHAT), chat_id=str(CHAT)
            )
        user_id = user.id or 0
        # The operator registers Ana's pendant with the CLI; Ana asks for pushes there first.
        code, out, err = await run_cli(
            "device", "add", "pendant", "--user", "ana", cwd=tmp_path, env=env
        )
        assert code == 0, err
        found = re.search(r"Token \(shown only now[^)]*\): (\S+)", out)
        assert found, out
        token = found.group(1)
        secret = tg.webhook_secret
        assert secret
        update = {"update_id": 1, "message": tg.message(CHAT, "/channel device")}
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"http://127.0.0.1:{cluster.ports[0]}/telegram",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": secret},
            ) as resp,
        ):
            assert resp.status == 200, await resp.text()
        await tg.wait_for(lambda: any("go to device first" in t for t in tg.texts(CHAT)), 20)

        leader = await leader_pid(db)
        assert leader is not None, cluster.tails()
        leading = cluster.index_of(leader)
        holder = next(i for i in range(3) if i != leading)  # the pendant's process: not the leader

        # --- a. the pendant is connected to a non-leader: the reminder reaches it, once -----
        async with pendant(device_ports[holder], token) as device:
            due = datetime.now(UTC) + timedelta(seconds=1)
            await _remind(db, user_id, "take the pills", due)
            try:
                at = await device.wait_push("⏰ Reminder: take the pills", within=15)
            except TimeoutError:
                raise AssertionError(f"{tg.texts(CHAT)}\n{cluster.tails()}") from None
            figures["a: pendant on a non-leader, lateness (s)"] = round(
                (at - due).total_seconds(), 2
            )
            await asyncio.sleep(1)
            assert [t for _, t in device.pushes()] == ["⏰ Reminder: take the pills"]
        assert (at - due).total_seconds() < LATE_LIMIT
        assert "⏰ Reminder: take the pills" not in tg.texts(CHAT)
        row = await _delivery(db, "take the pills")
        assert (row.status, row.channel) == ("delivered", "device")

        # --- b. the pendant is offline: after the deadline the reminder goes to Telegram ---
        due = datetime.now(UTC) + timedelta(seconds=1)
        on_telegram = asyncio.create_task(_arrival(tg, "⏰ Reminder: call the doctor"))
        await _remind(db, user_id, "call the doctor", due)
        await _until_waiting(db, "call the doctor")
        asked = time.monotonic()
        code, jobs_out, err = await run_cli("jobs", cwd=tmp_path, env=env)
        assert code == 0, err
        figures["b: lifebot jobs took (s)"] = round(time.monotonic() - asked, 2)
        waiting = [line for line in jobs_out.splitlines() if "reminder" in line and "#" in line]
        figures["b: lifebot jobs while waiting"] = waiting
        arrived = await on_telegram
        figures["b: pendant away, Telegram after (s)"] = round((arrived - due).total_seconds(), 2)
        figures["b: ... of which past the deadline (s)"] = round(
            (arrived - due).total_seconds() - AWAY_SECONDS, 2
        )
        assert any("pending" in line and "then telegram" in line for line in waiting), jobs_out
        assert (arrived - due).total_seconds() >= AWAY_SECONDS
        assert (arrived - due).total_seconds() < AWAY_SECONDS + LATE_LIMIT
        row = await _delivery(db, "call the doctor")
        assert (row.status, row.channel) == ("delivered", "telegram")  # fell back, not failed
        code, jobs_out, err = await run_cli("jobs", cwd=tmp_path, env=env)
        assert code == 0, err
        said = [line.strip() for line in jobs_out.splitlines() if f"#{row.id} " in line]
        figures["b: lifebot jobs after"] = said
        assert said == [
            f"#{row.id} reminder user {user_id} delivered, fell back to telegram: device pendant"
            f" is not connected here (the {AWAY_SECONDS} s wait for it ran out)"
        ], jobs_out

        # --- c. offline when due, back before the deadline: it gets the reminder at once ---
        due = datetime.now(UTC) + timedelta(seconds=1)
        await _remind(db, user_id, "drink water", due)
        await _until_waiting(db, "drink water")
        back = next(i for i in range(3) if i not in (leading, holder))  # the third process
        async with pendant(device_ports[back], token) as device:
            ready = datetime.now(UTC)
            try:
                at = await device.wait_push("⏰ Reminder: drink water", within=AWAY_SECONDS + 5)
            except TimeoutError:
                raise AssertionError(f"{tg.texts(CHAT)}\n{cluster.tails()}") from None
            figures["c: reconnected (s after due)"] = round((ready - due).total_seconds(), 2)
            figures["c: ... got it after reconnecting (s)"] = round((at - ready).total_seconds(), 2)
        assert "⏰ Reminder: drink water" not in tg.texts(CHAT)
        assert (at - ready).total_seconds() < 1.0  # at once, not at the next retry
        row = await _delivery(db, "drink water")
        assert (row.status, row.channel) == ("delivered", "device")

        # --- d. the pendant's process is a former leader (frozen, replaced, thawed) --------
        async with pendant(device_ports[leading], token) as device:
            lost = cluster.said(leading, LOST)
            frozen_at = time.monotonic()
            cluster.signal(leading, signal.SIGSTOP)
            _, took = await new_leader(db, leader, frozen_at)
            cluster.signal(leading, signal.SIGCONT)
            figures["d: takeover after SIGSTOP (s)"] = round(took, 2)
            await cluster.wait_said(leading, LOST, lost)  # it wakes up and learns it lost
            due = datetime.now(UTC)  # due now: what is tested is who hands it to the pendant
            await _remind(db, user_id, "stretch", due)
            try:
                at = await device.wait_push("⏰ Reminder: stretch", within=AWAY_SECONDS + 10)
            except TimeoutError:
                raise AssertionError(f"{tg.texts(CHAT)}\n{cluster.tails()}") from None
            figures["d: pendant on a former leader, lateness (s)"] = round(
                (at - due).total_seconds(), 2
            )
            await asyncio.sleep(1)
            assert [t for _, t in device.pushes()][-1:] == ["⏰ Reminder: stretch"]
        assert (at - due).total_seconds() < LATE_LIMIT
        assert "⏰ Reminder: stretch" not in tg.texts(CHAT)
        row = await _delivery(db, "stretch")
        assert (row.status, row.channel) == ("delivered", "device")

        # Long past every deadline: a copy that was still waiting would be on Telegram now.
        texts = tg.texts(CHAT)
        assert "⏰ Reminder: take the pills" not in texts
        assert texts.count("⏰ Reminder: call the doctor") == 1
        stored = {
            t: await _stored(db, t)
            for t in ("take the pills", "call the doctor", "drink water", "stretch")
        }
        figures["stored copies of each reminder"] = stored
        assert set(stored.values()) == {1}  # every attempt sent the one stored message
        figures["test run (s)"] = round(time.monotonic() - started, 1)
        print(f"\npendant scale figures: {figures}")
    finally:
        await cluster.close()
        await db.dispose()
