"""The outbox: at most once through crashes, receipts as proof, fallback, retries, quiet hours."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from bot.errors import Away, TransientChannelError, Unreachable
from bot.jobs.calendars.proposals import Candidate
from storage.models import Message
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.users import UserRepo
from tests.fakes.channel import (
    ChannelServer,
    KeyedFakeChannel,
    PlainChannel,
    RecordingChannel,
    SimulatedCrash,
)
from tests.fakes.clock import ManualClock
from tests.support.builders import make_inbound
from tests.support.jobs import deliveries, jobs_app, jobs_of, make_user

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


def pushes(channel: ChannelServer | RecordingChannel) -> list[str]:
    """What the channel accepted from the outbox (not replies to commands)."""
    if isinstance(channel, ChannelServer):
        return [m.text for _, m, _ in channel.accepted if m.kind != "reply"]
    return [m.text for m in channel.sent if m.kind != "reply"]


async def _reminder_due(app, clock: ManualClock, sender: str = "ana") -> None:
    """Ask for a reminder in 5 minutes and move the clock to it."""
    result = await app.dispatcher.handle(
        make_inbound("/remind in 5 minutes to stretch", sender=sender)
    )
    assert result.reply is not None and result.reply.startswith("I'll remind you Mon 12:05")
    clock.advance(minutes=5)


async def test_crash_after_the_channel_accepted_is_reconciled_by_asking_the_channel(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    server = ChannelServer()
    async with jobs_app(tmp_path, clock) as first:
        channel = KeyedFakeChannel("fake", server)
        first.dispatcher.register(channel)
        await make_user(first, "ana")
        await _reminder_due(first, clock)
        channel.crash_after_accept = True
        with pytest.raises(SimulatedCrash):
            await jobs_of(first).plan_and_send(clock.now())
        [row] = await deliveries(first, "reminder")
        assert (row.status, row.receipt) == ("sending", None)  # accepted, receipt never stored

    clock.advance(seconds=40)  # rows claimed under 30 s ago may belong to a live old leader
    async with jobs_app(tmp_path, clock) as second:  # the restarted process
        again = KeyedFakeChannel("fake", server)
        second.dispatcher.register(again)
        jobs = jobs_of(second)
        assert await jobs.outbox.reconcile(clock.now()) == 1
        await jobs.plan_and_send(clock.now())
        [row] = await deliveries(second, "reminder")

    assert pushes(server) == ["⏰ Reminder: stretch"]  # exactly one, never twice
    assert again.lookups == 1 and again.sent == []
    assert row.status == "delivered"
    proof = server.by_key(row.key or "")
    assert proof is not None and row.receipt == proof.message_id  # the channel's own proof


async def test_crash_before_the_channel_got_it_is_sent_after_the_restart(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    server = ChannelServer()
    async with jobs_app(tmp_path, clock) as first:
        channel = KeyedFakeChannel("fake", server)
        first.dispatcher.register(channel)
        await make_user(first, "ana")
        await _reminder_due(first, clock)
        channel.crash_before_accept = True  # marked "sending", then the process dies
        with pytest.raises(SimulatedCrash):
            await jobs_of(first).plan_and_send(clock.now())
    clock.advance(seconds=40)
    async with jobs_app(tmp_path, clock) as second:
        second.dispatcher.register(KeyedFakeChannel("fake", server))
        assert await jobs_of(second).outbox.reconcile(clock.now()) == 1
        await jobs_of(second).plan_and_send(clock.now())
        [row] = await deliveries(second, "reminder")
    assert pushes(server) == ["⏰ Reminder: stretch"]
    assert (row.status, row.attempts) == ("delivered", 2)


async def test_a_channel_that_cannot_be_asked_never_gets_a_duplicate(tmp_path: Path) -> None:
    """Never the same push twice; a reminder is followed by a note saying it may be a repeat.

    The user timed the reminder: losing it silently (the stop came before the channel got
    it) is worse than a second line they can see is a possible repeat of the first.
    """
    clock = ManualClock(T0)
    server = ChannelServer()
    async with jobs_app(tmp_path, clock) as first:
        channel = PlainChannel("fake", server)
        first.dispatcher.register(channel)
        await make_user(first, "ana")
        await _reminder_due(first, clock)
        channel.crash_after_accept = True
        with pytest.raises(SimulatedCrash):
            await jobs_of(first).plan_and_send(clock.now())
    clock.advance(seconds=10)
    async with jobs_app(tmp_path, clock) as second:
        second.dispatcher.register(PlainChannel("fake", server))
        jobs = jobs_of(second)
        assert await jobs.outbox.reconcile(clock.now()) == 0  # too recent to judge yet
        clock.advance(seconds=30)
        assert await jobs.outbox.reconcile(clock.now()) == 1
        for _ in range(3):
            await jobs.plan_and_send(clock.now())
            clock.advance(minutes=10)
        row, check = await deliveries(second, "reminder")
    assert pushes(server) == [
        "⏰ Reminder: stretch",
        "In case this did not reach you (I was restarting as it went out): ⏰ Reminder: stretch",
    ]  # the push itself at most once; the note says it may repeat
    assert row.status == "uncertain"
    assert "not sent again" in (row.last_error or "")
    assert (check.key, check.status) == (f"{row.key}:check", "delivered")


async def test_two_workers_on_one_database_send_each_push_once(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    fake = RecordingChannel("fake")
    async with jobs_app(tmp_path, clock) as a, jobs_app(tmp_path, clock) as b:
        a.dispatcher.register(fake)
        b.dispatcher.register(fake)
        for i in range(20):
            await make_user(a, f"u{i}", created=T0 - timedelta(hours=1), briefing_time="12:00")
        await jobs_of(a).briefings.plan(clock.now())
        await jobs_of(b).briefings.plan(clock.now())  # a second planner adds nothing
        await asyncio.gather(
            jobs_of(a).outbox.run_due(clock.now()), jobs_of(b).outbox.run_due(clock.now())
        )
        rows = await deliveries(a, "briefing")
    assert len(rows) == 20 and {r.status for r in rows} == {"delivered"}
    assert sorted(m.address.chat_id for m in fake.sent) == sorted(f"u{i}" for i in range(20))


async def test_a_failing_primary_channel_falls_back_to_the_linked_one(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock) as app:
        primary, linked = RecordingChannel("fake"), RecordingChannel("other")
        app.dispatcher.register(primary)
        app.dispatcher.register(linked)
        user = await make_user(app, "ana", channels=("fake", "other"))
        primary.fail_with = Unreachable("403: bot was blocked by the user")
        await _reminder_due(app, clock)
        await jobs_of(app).plan_and_send(clock.now())
        [row] = await deliveries(app, "reminder")
        async with app.db.session() as s:
            idents = {i.channel: i for i in await UserRepo(s).identities(user.id or 0)}

        # The next push goes straight to the linked channel.
        await app.dispatcher.handle(
            make_inbound("/remind in 5 minutes to drink water", sender="ana")
        )
        clock.advance(minutes=5)
        await jobs_of(app).plan_and_send(clock.now())

    assert (row.status, row.channel) == ("delivered", "other")
    assert row.receipt is not None
    assert pushes(linked) == ["⏰ Reminder: stretch", "⏰ Reminder: drink water"]
    assert idents["fake"].unreachable_at is not None
    assert "blocked" in (idents["fake"].unreachable_reason or "")
    assert idents["other"].unreachable_at is None


async def test_a_transient_failure_is_retried_with_backoff_then_delivered(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana")
        await _reminder_due(app, clock)
        fake.fail_with = TransientChannelError("502 from the channel")
        await jobs_of(app).plan_and_send(clock.now())
        [row] = await deliveries(app, "reminder")
        assert (row.status, row.attempts) == ("pending", 1)
        assert row.due_at == clock.now() + timedelta(seconds=30)
        await jobs_of(app).plan_and_send(clock.advance(seconds=10))  # not yet
        fake.fail_with = None
        await jobs_of(app).plan_and_send(clock.advance(seconds=20))
        [row] = await deliveries(app, "reminder")
    assert (row.status, row.attempts) == ("delivered", 2)
    assert pushes(fake) == ["⏰ Reminder: stretch"]


async def test_quiet_hours_hold_questions_until_morning_but_not_timed_reminders(
    tmp_path: Path,
) -> None:
    lisbon_2300 = datetime(2025, 6, 2, 22, 0, tzinfo=UTC)  # 23:00 WEST
    clock = ManualClock(lisbon_2300)
    async with jobs_app(tmp_path, clock) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        user = await make_user(app, "ana", timezone="Europe/Lisbon")
        jobs = jobs_of(app)
        await jobs.proposals.propose(
            user,
            Candidate(
                "Coffee",
                lisbon_2300 + timedelta(days=2),
                lisbon_2300 + timedelta(days=2, hours=1),
                None,
                [],
            ),
            source="chat",
            message_id=None,
            now=clock.now(),
        )
        async with app.db.session() as s:
            await OutboxRepo(s).enqueue(
                [
                    Push(
                        user.id or 0, "reminder", "r:1", clock.now(), text="take pills", urgent=True
                    )
                ],
                clock.now(),
            )
        await jobs.plan_and_send(clock.now())
        assert fake.texts() == ["take pills"]
        [question] = await deliveries(app, "proposal")
        assert question.status == "pending"
        assert question.due_at == datetime(2025, 6, 3, 6, 0, tzinfo=UTC)  # 07:00 local

        await jobs.plan_and_send(clock.set(datetime(2025, 6, 3, 5, 59, tzinfo=UTC)))
        assert len(fake.texts()) == 1
        await jobs.plan_and_send(clock.set(datetime(2025, 6, 3, 6, 0, tzinfo=UTC)))
    assert fake.texts()[1].startswith("Add to your calendar? Coffee")


async def test_a_push_for_an_away_pendant_waits_for_it_then_goes_to_the_next_channel(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock) as app:
        pendant, telegram = RecordingChannel("fake"), RecordingChannel("other")
        app.dispatcher.register(pendant)
        app.dispatcher.register(telegram)
        await make_user(app, "ana", channels=("fake", "other"))
        pendant.fail_with = Away("device ana is not connected here")
        await _reminder_due(app, clock)
        jobs = jobs_of(app)

        await jobs.plan_and_send(clock.now())
        [waiting] = await deliveries(app, "reminder")
        # It reconnects a minute later: the reminder reaches it, nowhere else.
        pendant.fail_with = None
        clock.advance(minutes=1)
        await jobs.plan_and_send(clock.now())
        [first] = await deliveries(app, "reminder")

        # The next one: the pendant stays away past the reminder's deadline.
        pendant.fail_with = Away("device ana is not connected here")
        await app.dispatcher.handle(
            make_inbound("/remind in 5 minutes to take the pills", sender="ana")
        )
        clock.advance(minutes=5)
        for _ in range(30):  # every few seconds, as the due timer would
            await jobs.plan_and_send(clock.now())
            clock.advance(seconds=5)
        second = next(r for r in await deliveries(app, "reminder") if r.id != first.id)

    assert waiting.status == "pending" and "waiting" in (waiting.last_error or "")
    assert (first.status, first.channel) == ("delivered", "fake")
    assert pushes(pendant) == ["⏰ Reminder: stretch"]
    assert (second.status, second.channel) == ("delivered", "other")
    assert pushes(telegram) == ["⏰ Reminder: take the pills"]  # never "failed", never silent


async def test_the_operator_chooses_how_long_a_reminder_waits_for_an_away_pendant(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    async with jobs_app(tmp_path, clock, push_away_reminder_seconds=20) as app:
        pendant, telegram = RecordingChannel("fake"), RecordingChannel("other")
        app.dispatcher.register(pendant)
        app.dispatcher.register(telegram)
        await make_user(app, "ana", channels=("fake", "other"))
        pendant.fail_with = Away("device ana is not connected here")
        await _reminder_due(app, clock)
        jobs = jobs_of(app)
        due = clock.now()
        await jobs.plan_and_send(clock.now())
        clock.advance(seconds=19)
        await jobs.plan_and_send(clock.now())
        [waiting] = await deliveries(app, "reminder")
        sent_before_deadline = pushes(telegram)
        clock.advance(seconds=1)
        await jobs.plan_and_send(clock.now())
        [row] = await deliveries(app, "reminder")
        async with app.db.session() as s:
            stored = (
                await s.exec(select(Message).where(Message.text == "⏰ Reminder: stretch"))
            ).all()

    assert sent_before_deadline == []  # 19 s: still waiting for the pendant (not 2 minutes)
    assert waiting.status == "pending" and f"{due + timedelta(seconds=20):%H:%M:%S}" in (
        waiting.last_error or ""
    )
    assert (row.status, row.channel) == ("delivered", "other")  # 20 s: the next channel
    assert row.last_error == (
        "fell back to other: device ana is not connected here (the 20 s wait for it ran out)"
    )
    assert pushes(telegram) == ["⏰ Reminder: stretch"] and pushes(pendant) == []
    # Three attempts, one message in the history: the model reads the reminder once.
    assert [m.status for m in stored] == ["sent"]
