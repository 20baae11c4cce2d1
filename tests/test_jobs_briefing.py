"""Morning briefings: on time in every zone (DST days too), once, late or skipped after downtime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from storage.repos.calendar import CalendarRepo
from storage.repos.tasks import TaskRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, fail, say
from tests.support.builders import make_inbound
from tests.support.jobs import deliveries, jobs_app, jobs_of, make_user


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# Expected UTC instants of 07:30 local, worked out by hand (not with the code under test):
# Lisbon moves from WET (UTC+0) to WEST (UTC+1) at 01:00 UTC on Sunday 30 March 2025;
# Tokyo is UTC+9 all year; New York leaves EDT (UTC-4) for EST (UTC-5) on 2 November 2025;
# Berlin is CET (UTC+1) in November.
CASES = [
    pytest.param(
        utc(2025, 3, 29, 0, 0),
        {
            "Europe/Lisbon": [
                utc(2025, 3, 29, 7, 30),
                utc(2025, 3, 30, 6, 30),
                utc(2025, 3, 31, 6, 30),
            ],
            "Asia/Tokyo": [
                utc(2025, 3, 29, 22, 30),
                utc(2025, 3, 30, 22, 30),
                utc(2025, 3, 31, 22, 30),
            ],
        },
        id="spring-forward-lisbon",
    ),
    pytest.param(
        utc(2025, 11, 1, 0, 0),
        {
            "America/New_York": [
                utc(2025, 11, 1, 11, 30),
                utc(2025, 11, 2, 12, 30),
                utc(2025, 11, 3, 12, 30),
            ],
            "Europe/Berlin": [
                utc(2025, 11, 1, 6, 30),
                utc(2025, 11, 2, 6, 30),
                utc(2025, 11, 3, 6, 30),
            ],
        },
        id="fall-back-new-york",
    ),
]


@pytest.mark.parametrize(("start", "expected"), CASES)
async def test_briefings_arrive_at_0730_local_in_two_zones_across_a_dst_change(
    tmp_path: Path, start: datetime, expected: dict[str, list[datetime]]
) -> None:
    clock = ManualClock(start)
    async with jobs_app(tmp_path, clock) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        users = {
            tz: await make_user(app, tz.split("/")[1], timezone=tz, created=start)
            for tz in expected
        }
        jobs = jobs_of(app)
        # Tick every 10 minutes for three days, as the scheduler would (more often, really).
        while clock.now() < start + timedelta(days=3):
            await jobs.plan_and_send(clock.now())
            clock.advance(minutes=10)

        rows = await deliveries(app, "briefing")
        for tz, times in expected.items():
            mine = [r for r in rows if r.user_id == users[tz].id]
            assert [r.delivered_at for r in mine] == times, tz
            assert [r.status for r in mine] == ["delivered"] * 3
            assert all(r.receipt for r in mine)  # the channel's message id, as proof
            texts = fake.texts(users[tz].display_name)
            assert len(texts) == 3
            local_days = [t.astimezone(ZoneInfo(tz)).day for t in times]
            for text, day in zip(texts, local_days, strict=True):
                assert f" {day} " in text  # "It's Sunday 30 March." names the local day


async def test_a_restart_between_scheduling_and_sending_gives_exactly_one_briefing(
    tmp_path: Path,
) -> None:
    clock = ManualClock(utc(2025, 6, 2, 7, 30))
    server = RecordingChannel("fake")
    async with jobs_app(tmp_path, clock) as first:
        first.dispatcher.register(server)
        await make_user(first, "ana", created=utc(2025, 6, 2))
        assert await jobs_of(first).briefings.plan(clock.now()) == "queued 1"
        # The process stops here: the briefing is planned but not sent.
    clock.advance(minutes=2)
    async with jobs_app(tmp_path, clock) as second:
        second.dispatcher.register(server)
        jobs = jobs_of(second)
        for _ in range(3):  # the new process plans and sends; later ticks find nothing new
            await jobs.plan_and_send(clock.now())
            clock.advance(minutes=1)
        [row] = await deliveries(second, "briefing")
    assert len(server.sent) == 1
    assert (row.status, row.key) == ("delivered", "briefing:1:2025-06-02")


async def test_after_downtime_a_briefing_under_3h_late_is_sent_and_an_older_one_skipped(
    tmp_path: Path,
) -> None:
    clock = ManualClock(utc(2025, 6, 2, 9, 0))  # back up at 09:00 UTC
    async with jobs_app(tmp_path, clock) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        late = await make_user(app, "late", created=utc(2025, 5, 1))  # 07:30: 1.5 h late
        early = await make_user(app, "early", created=utc(2025, 5, 1), briefing_time="05:30")
        await jobs_of(app).plan_and_send(clock.now())
        rows = {r.user_id: r for r in await deliveries(app, "briefing")}
    assert rows[late.id or 0].status == "delivered"
    assert rows[early.id or 0].status == "skipped"
    assert "3.5 h late" in (rows[early.id or 0].last_error or "")
    assert len(fake.texts("late")) == 1
    assert fake.texts("early") == []


async def test_briefing_off_and_settings_changed_after_the_time_owe_nothing(tmp_path: Path) -> None:
    clock = ManualClock(utc(2025, 6, 2, 8, 0))
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "off", created=utc(2025, 5, 1), briefing_enabled=False)
        moved = await make_user(app, "moved", created=utc(2025, 5, 1))
        # At 08:00 the user moves their briefing to 07:45: today's 07:45 has passed already.
        await app.dispatcher.handle(make_inbound("/briefing at 07:45", sender="moved"))
        await jobs_of(app).plan_and_send(clock.now())
        assert await deliveries(app, "briefing") == []
        clock.set(utc(2025, 6, 3, 7, 45))
        await jobs_of(app).plan_and_send(clock.now())
        [row] = await deliveries(app, "briefing")
    assert (row.user_id, row.status) == (moved.id, "delivered")


async def test_briefing_now_is_written_by_the_llm_with_read_only_tools(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(utc(2025, 6, 2, 6, 0))
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        user = await make_user(app, "ana", timezone="Europe/Lisbon")
        assert user.id is not None
        async with app.db.session() as s:
            await CalendarRepo(s).add_or_merge(
                user.id,
                title="Dentist",
                start=utc(2025, 6, 2, 9, 0),
                end=utc(2025, 6, 2, 10, 0),
                place="Rua Augusta",
                people=None,
                source="manual",
                now=clock.now(),
            )
            await TaskRepo(s).add(user.id, "pay the electricity bill", utc(2025, 6, 2, 17, 0))
        fake_llm.add(say("Morning Ana! Dentist at 10:00, then the electricity bill."))

        await app.dispatcher.handle(make_inbound("/briefing now", sender="ana"))

    assert fake.texts() == ["Morning Ana! Dentist at 10:00, then the electricity bill."]
    [request] = fake_llm.chat_requests
    system = request["messages"][0]["content"]
    assert "10:00-11:00 Dentist (Rua Augusta)" in system  # local time, from the calendar
    assert "pay the electricity bill, due 18:00" in system
    offered = {t["function"]["name"] for t in request["tools"]}
    assert {"list_events", "list_tasks", "list_reminders"} <= offered
    assert not offered & {"create_task", "add_event", "set_reminder", "forget_fact", "set_timezone"}


async def test_when_the_llm_is_down_a_deterministic_briefing_goes_out(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(utc(2025, 6, 2, 7, 30))
    async with jobs_app(tmp_path, clock, fake_llm, llm_max_retries=0) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana", created=utc(2025, 6, 2))
        fake_llm.add(fail(500))
        await jobs_of(app).plan_and_send(clock.now())
        [row] = await deliveries(app, "briefing")
    assert row.status == "delivered"
    [text] = fake.texts()
    assert text.startswith("Good morning, ana! It's Monday 2 June.")
    assert "Nothing on your calendar today." in text


async def test_yesterday_is_recapped_from_episodes_else_from_the_days_messages(
    tmp_path: Path,
) -> None:
    from storage import models

    clock = ManualClock(utc(2025, 6, 3, 7, 30))
    async with jobs_app(tmp_path, clock) as app:
        ana = await make_user(app, "ana")
        bob = await make_user(app, "bob")
        async with app.db.session() as s:
            s.add(
                models.Episode(
                    user_id=ana.id or 0,
                    scope="conv:1",
                    title="Planned the garden with Ana's sister",
                    summary="",
                    start_at=utc(2025, 6, 2, 15, 0),
                    end_at=utc(2025, 6, 2, 16, 0),
                )
            )
            s.add(
                models.Message(
                    user_id=bob.id,
                    direction="in",
                    role="user",
                    channel="fake",
                    text="bought tickets for the concert",
                    created_at=utc(2025, 6, 2, 18, 0),
                )
            )
        jobs = jobs_of(app)
        ana_text, _ = await jobs.briefings.compose(ana, clock.now())
        bob_text, _ = await jobs.briefings.compose(bob, clock.now())
    assert "Yesterday:\n- Planned the garden with Ana's sister" in ana_text
    assert 'Yesterday:\n- You sent me 1 message, e.g. "bought tickets for the concert"' in bob_text
