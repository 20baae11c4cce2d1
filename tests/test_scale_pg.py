"""Several processes on one PostgreSQL database behave as one (issue 22).

Each ``App`` here stands for one ``serve`` process: its own engine, pools, dispatcher and
locks; only the database is shared, exactly as between processes.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from bot.app.build import App, build_app, start_app, start_push_handover
from bot.errors import Away
from bot.jobs.engine.leader import LeaseLock
from bot.messages import Address, OutboundMessage, Receipt
from storage.models import ChannelIdentity, Delivery, Reminder, User
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.reminders import ReminderRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, Step, say
from tests.support.app import AppFactory, add_user, channel, make_settings
from tests.support.builders import make_inbound

pytestmark = pytest.mark.postgres


async def _processes(
    app_factory: AppFactory, llm: FakeLLM, url: str, n: int, **overrides: Any
) -> list[App]:
    apps = []
    for _ in range(n):
        app = await app_factory(llm, database_url_setting=url, jobs_enabled=False, **overrides)
        app.dispatcher.register(RecordingChannel("fake"))
        apps.append(app)
    return apps


def _slow_answers(llm: FakeLLM, seconds: float, spans: list[tuple[str, float, float]]) -> None:
    """Every agent request takes ``seconds``; (last user text, start, end) is recorded."""

    def answer(body: dict[str, Any]) -> Step:
        if body.get("model") != "fake-smart":  # memory extraction and the like
            return say("{}")
        last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        start = time.monotonic()
        spans.append((str(last), start, start + seconds))
        return say(f"re: {last}", delay=seconds)

    llm.default = answer


async def test_turns_of_one_chat_never_overlap_across_processes(
    app_factory: AppFactory, fake_llm: FakeLLM, postgres_url: str
) -> None:
    p1, p2, p3 = await _processes(app_factory, fake_llm, postgres_url, 3)
    await add_user(p1, "ann")
    spans: list[tuple[str, float, float]] = []
    _slow_answers(fake_llm, 0.3, spans)

    # Three messages of one chat, each reaching a different process, nearly at once.
    async def send(app: App, text: str, delay: float) -> None:
        await asyncio.sleep(delay)
        await app.dispatcher.handle(make_inbound(text, sender="ann"))

    await asyncio.gather(send(p1, "one", 0), send(p2, "two", 0.02), send(p3, "three", 0.04))

    turns = sorted((start, end) for _, start, end in spans)
    assert len(turns) == 3
    overlaps = sum(1 for a, b in itertools.pairwise(turns) if b[0] < a[1])
    assert overlaps == 0, turns
    replies = [t for app in (p1, p2, p3) for t in channel(app).texts()]
    assert sorted(replies) == ["re: one", "re: three", "re: two"]


async def test_a_strangers_first_messages_on_two_processes_make_one_identity(
    app_factory: AppFactory, fake_llm: FakeLLM, postgres_url: str
) -> None:
    # The allowlist lets a new person in on their first message: that creates the user.
    p1, p2 = await _processes(app_factory, fake_llm, postgres_url, 2, allowlist="fake:newbie")
    fake_llm.default = lambda body: say("hello!")

    results = await asyncio.gather(
        *(
            app.dispatcher.handle(make_inbound(f"hi {i}", sender="newbie"))
            for i in range(6)
            for app in (p1, p2)
        )
    )

    assert [r.status for r in results] == ["answered"] * 12
    async with p1.db.session() as s:
        idents = (await s.exec(select(ChannelIdentity))).all()
        users = (await s.exec(select(User))).all()
    assert len(idents) == 1
    assert len(users) == 1


async def test_three_processes_started_together_on_a_fresh_database_all_come_up(
    postgres_url: str, tmp_path: Path
) -> None:
    apps = [build_app(make_settings(tmp_path, database_url_setting=postgres_url)) for _ in range(3)]
    try:
        results = await asyncio.gather(*(start_app(a) for a in apps), return_exceptions=True)
        assert results == [None, None, None]
    finally:
        for a in apps:
            await a.close()


_TARGET: dict[str, Any] = {
    "channel": "fake",
    "account": "acct",
    "chat_id": "ann",
    "message_id": None,
}


async def test_a_frozen_leader_is_replaced_and_its_late_sends_are_refused(
    any_db_app: App,
) -> None:
    app = any_db_app
    user = await add_user(app, "ann")
    assert user.id is not None
    now = datetime.now(UTC)
    a = LeaseLock(app.db, "host-a:11:aaaaaa", ttl=timedelta(seconds=8))
    b = LeaseLock(app.db, "host-b:22:bbbbbb", ttl=timedelta(seconds=8))
    assert await a.acquire(now)
    assert not await b.acquire(now + timedelta(seconds=2))
    stale = a.fence
    # "a" freezes (SIGSTOP): no more renewals. Its lease runs out and "b" takes over.
    later = now + timedelta(seconds=9)
    assert await b.acquire(later)
    assert b.fence is not None and stale is not None and b.fence.token == stale.token + 1
    async with app.db.session() as s:
        await OutboxRepo(s).enqueue([Push(user.id, "reminder", "r-1", later, "stretch")], later)
        [row] = (await s.exec(select(Delivery))).all()
    assert row.id is not None

    async with app.db.session() as s:  # "a" wakes up and tries to send: refused
        assert not await OutboxRepo(s).claim(row.id, later, fence=stale, **_TARGET)
    async with app.db.session() as s:
        assert await OutboxRepo(s).claim(row.id, later, fence=b.fence, **_TARGET)
    assert not await a.acquire(later)  # and at its next heartbeat it learns it lost


class Pendant(RecordingChannel):
    """The pendant channel of one process: the device is connected here or not."""

    def __init__(self, here: bool) -> None:
        super().__init__("device")
        self.here = here

    def holds(self, address: Address) -> bool:
        return self.here

    async def send(self, msg: OutboundMessage) -> Receipt:
        if not self.here:
            raise Away(f"device {msg.address.chat_id} is not connected here")
        return await super().send(msg)


async def test_a_push_for_a_pendant_on_another_process_is_handed_over_to_it(
    app_factory: AppFactory, fake_llm: FakeLLM, postgres_url: str
) -> None:
    leader, other = await _processes(app_factory, fake_llm, postgres_url, 2)
    away, connected, telegram = Pendant(here=False), Pendant(here=True), RecordingChannel("other")
    leader.dispatcher.register(away)
    leader.dispatcher.register(telegram)
    other.dispatcher.register(connected)
    user = await add_user(leader, "ana", channel_name="device")
    async with leader.db.session() as s:
        await UserRepo(s).add_identity(user.id or 0, "other", "acct", "ana", chat_id="ana")
    await start_push_handover(other)
    service = leader.jobs.service
    try:
        assert await service.step()
        due = datetime.now(UTC) + timedelta(seconds=1)
        async with leader.db.session() as s:
            await ReminderRepo(s).add(Reminder(user_id=user.id or 0, text="pills", next_at=due))
        for _ in range(100):
            if connected.sent:
                break
            await asyncio.sleep(0.1)
    finally:
        await service.stop()
    assert [m.text for m in connected.sent] == ["⏰ Reminder: pills"]
    assert away.sent == [] and telegram.sent == []  # once, through the pendant's process
    async with leader.db.session() as s:
        [row] = (await s.exec(select(Delivery))).all()
    assert (row.status, row.channel) == ("delivered", "device")
