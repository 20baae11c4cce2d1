"""Three real ``lifebot serve`` processes on one PostgreSQL database behave as one (issue 22).

Telegram runs in webhook mode behind a "load balancer": the test posts each update to the
next process in turn, as a round-robin balancer would. The model answers slowly, so turns of
one chat landing on different processes would overlap if nothing held them apart. Then the
leader is frozen (SIGSTOP) and later killed (SIGKILL), each time just before a reminder is due.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlmodel import col, select

from storage.db import Database
from storage.models import Message, Reminder
from storage.repos.reminders import ReminderRepo
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, Step, say
from tests.fakes.telegram_api import BOT_ID, FakeTelegram
from tests.support.serve import Cluster, leader_pid, lock_waits, new_leader, serve_env

pytestmark = pytest.mark.postgres

LLM_SECONDS = 0.8
"""How long the model takes over each answer."""
CHATS = [9001 + i for i in range(7)]
"""Seven chats: with three processes, each chat's three messages land on three processes."""
ROUNDS = 3
TAKEOVER_LIMIT = 15.0
LEASE = {"LIFEBOT_JOBS_HEARTBEAT": "1", "LIFEBOT_JOBS_LEASE_SECONDS": "3"}
"""A short leader lease, as an operator may set: each takeover below waits for the frozen or
killed leader's lease to run out (the defaults, 8 s and 2 s, made that 10 s of idling twice)."""


class Model:
    """The slow model: records when each chat's turns ran."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = {}

    def __call__(self, body: dict[str, Any]) -> Step:
        system = str(body["messages"][0].get("content", ""))
        if "Classify the user's message" in system:
            return say('{"route": "chat"}')
        if body.get("model") != "fake-smart":
            return say("{}")  # memory's extraction and the like
        last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        start = time.monotonic()
        self.spans.setdefault(str(last).split("#")[0], []).append((start, start + LLM_SECONDS))
        return say(f"re: {last}", delay=LLM_SECONDS)


async def _remind(db: Database, user_id: int, text: str, due: datetime) -> None:
    async with db.session() as s:
        await ReminderRepo(s).add(Reminder(user_id=user_id, text=text, next_at=due))


async def _reminded(tg: FakeTelegram, chat: int, text: str, cluster: Cluster, db: Database) -> None:
    """Wait for the reminder's push; on a timeout say what the processes and sessions did."""
    try:
        await tg.wait_for(lambda: f"⏰ Reminder: {text}" in tg.texts(chat), within=20)
    except TimeoutError:
        waits = await lock_waits(db)
        raise AssertionError(
            f"no reminder {text!r}; sent {tg.texts(chat)}\n{waits}\n{cluster.tails()}"
        ) from None


@pytest.mark.slow
async def test_three_serve_processes_answer_in_order_once_and_survive_their_leader(
    tmp_path: Path, postgres_url: str, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    model = Model()
    fake_llm.default = model
    env = serve_env(postgres_url, fake_llm, tg, **LEASE)
    cluster = Cluster(tmp_path, env)
    db = Database(postgres_url)
    figures: dict[str, Any] = {}
    started = time.monotonic()
    try:
        # Started together on a fresh database: all three come up.
        await cluster.start(3)
        await cluster.wait_listening()
        await tg.wait_for(lambda: len(tg.calls_to("setWebhook")) >= 3, within=30)
        figures["3 processes up (s)"] = round(time.monotonic() - started, 1)
        users: dict[int, int] = {}
        async with db.session() as s:
            repo = UserRepo(s)
            for chat in CHATS:
                user, _ = await repo.create_with_identity(
                    f"user{chat}", "telegram", str(BOT_ID), str(chat), chat_id=str(chat)
                )
                users[chat] = user.id or 0

        # --- ordering and exactly-once replies, fed round robin ---------------------------
        secret = tg.webhook_secret
        assert secret
        update_ids = itertools.count(1)
        order = itertools.cycle(range(3))
        async with aiohttp.ClientSession() as http:
            for r in range(ROUNDS):
                for chat in CHATS:
                    update = {
                        "update_id": next(update_ids),
                        "message": tg.message(chat, f"{chat}#{r}"),
                    }
                    url = f"http://127.0.0.1:{cluster.ports[next(order)]}/telegram"
                    headers = {"X-Telegram-Bot-Api-Secret-Token": secret}
                    async with http.post(url, json=update, headers=headers) as resp:
                        assert resp.status == 200, await resp.text()
                await asyncio.sleep(0.3)
        expected = {chat: [f"re: {chat}#{r}" for r in range(ROUNDS)] for chat in CHATS}
        try:
            await tg.wait_for(lambda: all(tg.texts(c) == expected[c] for c in CHATS), within=40)
        except TimeoutError:
            got = {c: tg.texts(c) for c in CHATS}
            async with db.session() as s:
                rows = (await s.exec(select(Message).order_by(col(Message.id)))).all()
            seen = "\n".join(
                f"{m.id} {m.direction} {m.chat_id} {m.text!r} {m.created_at:%H:%M:%S.%f} {m.status}"
                for m in rows
                if m.direction == "in"
            )
            raise AssertionError(f"replies: {got}\n{seen}") from None
        overlaps = sum(
            1
            for spans in model.spans.values()
            for a, b in itertools.pairwise(sorted(spans))
            if b[0] < a[1]
        )
        figures["all replies (s)"] = round(time.monotonic() - started, 1)
        figures["overlapping turn pairs"] = overlaps
        figures["turns"] = sum(len(s) for s in model.spans.values())
        assert overlaps == 0
        assert figures["turns"] == len(CHATS) * ROUNDS  # each message answered once

        # --- the leader freezes just before a reminder is due -----------------------------
        chat = CHATS[0]
        first = await leader_pid(db)
        assert first is not None, cluster.tails()
        due = datetime.now(UTC) + timedelta(seconds=3)
        await _remind(db, users[chat], "take the pills", due)
        stopped_at = time.monotonic()
        frozen = cluster.index_of(first)
        cluster.signal(frozen, signal.SIGSTOP)
        second, took = await new_leader(db, first, stopped_at)
        figures["takeover after SIGSTOP (s)"] = round(took, 2)
        await _reminded(tg, chat, "take the pills", cluster, db)
        figures["reminder lateness across SIGSTOP (s)"] = round(
            (datetime.now(UTC) - due).total_seconds(), 2
        )
        assert took < TAKEOVER_LIMIT
        assert figures["reminder lateness across SIGSTOP (s)"] < TAKEOVER_LIMIT
        cluster.signal(frozen, signal.SIGCONT)  # it wakes up, learns it lost, sends nothing

        # --- then the new leader dies outright ---------------------------------------------
        due = datetime.now(UTC) + timedelta(seconds=2)
        await _remind(db, users[chat], "call the doctor", due)
        killed_at = time.monotonic()
        cluster.signal(cluster.index_of(second), signal.SIGKILL)
        _, took = await new_leader(db, second, killed_at)
        figures["takeover after SIGKILL (s)"] = round(took, 2)
        await _reminded(tg, chat, "call the doctor", cluster, db)
        figures["reminder lateness across SIGKILL (s)"] = round(
            (datetime.now(UTC) - due).total_seconds(), 2
        )
        assert took < TAKEOVER_LIMIT
        assert figures["reminder lateness across SIGKILL (s)"] < TAKEOVER_LIMIT

        await asyncio.sleep(2)  # time for a duplicate to show up, if there were one
        texts = tg.texts(chat)
        assert texts.count("⏰ Reminder: take the pills") == 1
        assert texts.count("⏰ Reminder: call the doctor") == 1
        assert all(tg.texts(c) == expected[c] for c in CHATS[1:])
        figures["test run (s)"] = round(time.monotonic() - started, 1)
        print(f"\nscale figures: {figures}")
    finally:
        await cluster.close()
        await db.dispose()
