"""Slack pushes exactly once: the outbox key rides as message metadata and is found again.

Real slack_sdk against the loopback fake Slack; the crash is the process dying while Slack's
answer to chat.postMessage is still on its way (Slack has the message, we have no receipt).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack.adapter import SlackAdapter
from bot.adapters.slack.keyed import PUSH_EVENT
from bot.app.build import App
from bot.errors import ChannelError, Unreachable
from bot.jobs.outbox.sending import KeyedChannel
from bot.messages import Address, InboundMessage, OutboundMessage
from storage.models import Delivery
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.users import UserRepo
from tests.fakes.clock import ManualClock
from tests.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, TEAM_ID, FakeSlack
from tests.support.jobs import deliveries, jobs_app, jobs_of
from tests.support.slack import ANA, ANA_DM, manifest

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
DM = Address("slack", TEAM_ID, ANA_DM)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    """A started fake Slack granting exactly the manifest's scopes."""
    slack = FakeSlack(
        users={ANA: "Ana Lima"}, scopes=set(manifest()["oauth_config"]["scopes"]["bot"])
    )
    await slack.start()
    yield slack
    await slack.stop()


async def _ignore(_msg: InboundMessage) -> None:
    return None


@asynccontextmanager
async def slack_adapter(fake: FakeSlack, **kw: Any) -> AsyncIterator[SlackAdapter]:
    """A started Slack adapter (HTTP mode: no socket needed to send and look up)."""
    adapter = SlackAdapter(
        bot_token=BOT_TOKEN,
        clock=ManualClock(T0),
        mode="http",
        signing_secret=SIGNING_SECRET,
        api_url=fake.api_url,
        http_port=0,
        **kw,
    )
    await adapter.start(_ignore)
    try:
        yield adapter
    finally:
        await adapter.stop()


def reminder(text: str = "⏰ Reminder: stretch") -> OutboundMessage:
    return OutboundMessage(DM, text, kind="reminder")


async def test_a_keyed_push_is_found_again_by_its_key(fake: FakeSlack) -> None:
    async with slack_adapter(fake) as slack:
        assert isinstance(slack, KeyedChannel)  # the outbox will ask it after a crash
        receipt = await slack.send_keyed(reminder(), "reminder:7:2025-06-02T12:05")
        found = await slack.find_sent(DM, "reminder:7:2025-06-02T12:05")
        missing = await slack.find_sent(DM, "reminder:8:2025-06-02T12:05")

    assert fake.texts(ANA_DM) == ["⏰ Reminder: stretch"]
    assert fake.posted[0]["metadata"] == {
        "event_type": PUSH_EVENT,
        "event_payload": {"key": "reminder:7:2025-06-02T12:05", "part": 0, "parts": 1},
    }
    assert found == receipt and receipt.message_id == fake.posted[0]["ts"]
    assert missing is None
    lookup = fake.calls_of("conversations.history")[0].args
    assert lookup["channel"] == ANA_DM and lookup["include_all_metadata"] in ("1", "true")


async def test_a_plain_send_carries_no_key(fake: FakeSlack) -> None:
    async with slack_adapter(fake) as slack:
        await slack.send(reminder())
        assert await slack.find_sent(DM, "reminder:7") is None
    assert fake.posted[0]["metadata"] is None


async def test_only_our_own_recent_messages_count(fake: FakeSlack) -> None:
    key = "briefing:1:2025-06-02"
    async with slack_adapter(fake, lookback=200) as slack:
        # Another app in the same DM using our event type and key is not us.
        fake.add_message(
            ANA_DM,
            "spoof",
            user="U0OTHERBOT",
            bot_id="B0OTHER",
            metadata={"event_type": PUSH_EVENT, "event_payload": {"key": key}},
        )
        assert await slack.find_sent(DM, key) is None
        receipt = await slack.send_keyed(OutboundMessage(DM, "Good morning", kind="briefing"), key)
        for i in range(150):  # Ana chats on after the push: the lookup pages back to it
            fake.add_message(ANA_DM, f"message {i}")
        assert await slack.find_sent(DM, key) == receipt
        assert [c.args.get("limit") for c in fake.calls_of("conversations.history")][-2:] == [
            "100",
            "100",
        ]
        for i in range(60):  # now 210 newer messages: beyond the look-back
            fake.add_message(ANA_DM, f"more {i}")
        before = len(fake.calls_of("conversations.history"))
        assert await slack.find_sent(DM, key) is None
        assert len(fake.calls_of("conversations.history")) - before == 2  # bounded: 2 pages


async def test_every_part_of_a_long_push_carries_the_key(fake: FakeSlack) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "words " * 150 for i in range(8))
    async with slack_adapter(fake) as slack:
        receipt = await slack.send_keyed(OutboundMessage(DM, text, kind="briefing"), "b:2")
        assert await slack.find_sent(DM, "b:2") == receipt
    parts = [p["metadata"]["event_payload"] for p in fake.posted]
    assert len(parts) > 1
    assert parts == [{"key": "b:2", "part": i, "parts": len(parts)} for i in range(len(parts))]
    assert receipt.message_id == fake.posted[0]["ts"]  # the receipt is the first message


async def test_keyed_sends_and_lookups_use_the_adapters_error_handling(fake: FakeSlack) -> None:
    async with slack_adapter(fake) as slack:
        fake.fail("chat.postMessage", status=429, retry_after=0)
        receipt = await slack.send_keyed(reminder(), "r:1")
        fake.fail("conversations.history", status=429, retry_after=0)
        assert await slack.find_sent(DM, "r:1") == receipt  # the 429 was waited out
        assert len(fake.posted) == 1

        with pytest.raises(Unreachable, match="goes to a DM only"):
            await slack.send_keyed(
                OutboundMessage(Address("slack", TEAM_ID, "C0GENERAL"), "x", kind="reminder"),
                "r:2",
            )
        fake.scopes = {"chat:write"}  # an app installed before im:history was asked for
        with pytest.raises(ChannelError, match="missing_scope"):
            await slack.find_sent(DM, "r:1")
        fake.scopes = None
        fake.revoked = True
        with pytest.raises(Unreachable, match="token_revoked"):
            await slack.find_sent(DM, "r:1")
        with pytest.raises(Unreachable, match="token_revoked"):
            await slack.send_keyed(reminder(), "r:3")
    assert len(fake.posted) == 1


# --- end to end through the outbox ---------------------------------------------------------


@asynccontextmanager
async def process(tmp_path: Path, clock: ManualClock, fake: FakeSlack) -> AsyncIterator[App]:
    """One lifebot process: the app with jobs and a real Slack adapter on the fake."""
    async with jobs_app(tmp_path, clock) as app, slack_adapter(fake) as slack:
        app.dispatcher.register(slack)
        yield app


async def _ana_with_a_reminder_due(app: App, clock: ManualClock) -> None:
    async with app.db.session() as s:
        users = UserRepo(s)
        ana = await users.create("Ana")
        assert ana.id is not None
        await users.add_identity(ana.id, "slack", TEAM_ID, ANA, chat_id=ANA_DM)
        push = Push(ana.id, "reminder", f"reminder:{ana.id}:1", clock.now(), text="stretch")
        await OutboxRepo(s).enqueue([push], clock.now())


async def _row(app: App) -> Delivery:
    [row] = await deliveries(app, "reminder")
    return row


async def test_a_push_slack_got_before_the_crash_is_recorded_not_resent(
    tmp_path: Path, fake: FakeSlack
) -> None:
    clock = ManualClock(T0)
    async with process(tmp_path, clock, fake) as first:
        await _ana_with_a_reminder_due(first, clock)
        fake.hold("chat.postMessage")  # Slack posts it; its answer never reaches us
        sending = asyncio.create_task(jobs_of(first).outbox.run_due(clock.now()))
        await asyncio.wait_for(fake.held.wait(), 10)
        sending.cancel()  # the process dies
        with pytest.raises(asyncio.CancelledError):
            await sending
        row = await _row(first)
        assert (row.status, row.receipt) == ("sending", None)
    assert fake.texts(ANA_DM) == ["stretch"]

    clock.advance(seconds=40)  # older than the outbox's settle time: no live sender has it
    fake.release()
    async with process(tmp_path, clock, fake) as second:
        outbox = jobs_of(second).outbox
        assert await outbox.reconcile(clock.now()) == 1
        await outbox.run_due(clock.now())
        row = await _row(second)

    assert fake.texts(ANA_DM) == ["stretch"]  # Slack got it exactly once
    assert row.status == "delivered"
    assert row.receipt == fake.posted[0]["ts"]  # Slack's own ts is the proof
    assert len(fake.calls_of("conversations.history")) == 1


async def test_a_push_slack_never_got_is_sent_after_the_restart(
    tmp_path: Path, fake: FakeSlack
) -> None:
    clock = ManualClock(T0)
    async with process(tmp_path, clock, fake) as first:
        await _ana_with_a_reminder_due(first, clock)
        row = await _row(first)
        assert row.id is not None
        async with first.db.session() as s:  # claimed, then the process died before posting
            await OutboxRepo(s).claim(
                row.id,
                clock.now(),
                channel="slack",
                account=TEAM_ID,
                chat_id=ANA_DM,
                message_id=None,
            )
    clock.advance(seconds=40)
    async with process(tmp_path, clock, fake) as second:
        outbox = jobs_of(second).outbox
        assert await outbox.reconcile(clock.now()) == 1
        await outbox.run_due(clock.now())
        row = await _row(second)
    assert fake.texts(ANA_DM) == ["stretch"]
    assert (row.status, row.receipt) == ("delivered", fake.posted[0]["ts"])


async def test_a_lookup_slack_cannot_answer_leaves_the_push_undecided(
    tmp_path: Path, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(T0)
    async with process(tmp_path, clock, fake) as first:
        await _ana_with_a_reminder_due(first, clock)
        fake.hold("chat.postMessage")
        sending = asyncio.create_task(jobs_of(first).outbox.run_due(clock.now()))
        await asyncio.wait_for(fake.held.wait(), 10)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
    clock.advance(seconds=40)
    fake.release()
    fake.scopes = {"chat:write"}  # im:history not granted: Slack cannot be asked
    async with process(tmp_path, clock, fake) as second:
        outbox = jobs_of(second).outbox
        with caplog.at_level(logging.WARNING, logger="bot.jobs.outbox.delivery"):
            await outbox.reconcile(clock.now())
        await outbox.run_due(clock.now())
        assert (await _row(second)).status == "sending"  # neither resent nor given up
        assert "missing_scope" in caplog.text
        fake.scopes = None  # the app is reinstalled with the scope; the next pass settles it
        await outbox.reconcile(clock.now())
        row = await _row(second)
    assert fake.texts(ANA_DM) == ["stretch"]
    assert (row.status, row.receipt) == ("delivered", fake.posted[0]["ts"])
