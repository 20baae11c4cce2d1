"""Reminders: a table of phrasings read in the user's zone, confirmed in words, fired once."""

# ruff: noqa: E501  (tables of cases read best one case per line)

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import select

from bot.jobs.reminders.phrases import (
    PhraseError,
    describe_recurrence,
    next_occurrence,
    parse_reminder,
)
from bot.jobs.reminders.service import confirmation
from storage.models import Reminder
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, call, say
from tests.support.builders import make_inbound
from tests.support.jobs import deliveries, jobs_app, jobs_of, make_user

NY = ZoneInfo("America/New_York")
NOW = datetime(2025, 6, 3, 10, 0, tzinfo=NY)  # Tuesday 10:00 EDT (14:00 UTC)

# (request, expected first time in New York "Day YYYY-MM-DD HH:MM", what, repeat or "")
PHRASES = [
    ("remind me at 5pm to call mom", "Tue 2025-06-03 17:00", "call mom", ""),
    ("remind me to call mom at 5pm", "Tue 2025-06-03 17:00", "call mom", ""),
    ("in 20 minutes", "Tue 2025-06-03 10:20", "", ""),
    ("remind me in 20 minutes to stretch", "Tue 2025-06-03 10:20", "stretch", ""),
    ("in 20 minutes remind me to check the oven", "Tue 2025-06-03 10:20", "check the oven", ""),
    ("remind me in an hour to call Ana", "Tue 2025-06-03 11:00", "call Ana", ""),
    ("remind me in half an hour to take the bread out", "Tue 2025-06-03 10:30", "take the bread out", ""),
    ("in 1h30 remind me to leave", "Tue 2025-06-03 11:30", "leave", ""),
    ("remind me in an hour and a half to leave", "Tue 2025-06-03 11:30", "leave", ""),
    ("remind me in 2 days to pay rent", "Thu 2025-06-05 10:00", "pay rent", ""),
    ("remind me in 3 weeks to repot the plants", "Tue 2025-06-24 10:00", "repot the plants", ""),
    ("tomorrow morning", "Wed 2025-06-04 09:00", "", ""),
    ("remind me tomorrow morning to water the plants", "Wed 2025-06-04 09:00", "water the plants", ""),
    ("remind me tomorrow at 9 to buy bread", "Wed 2025-06-04 09:00", "buy bread", ""),
    ("remind me tomorrow at 5 to pick up the kids", "Wed 2025-06-04 17:00", "pick up the kids", ""),
    ("remind me the day after tomorrow at 10:00 to call the bank", "Thu 2025-06-05 10:00", "call the bank", ""),
    ("remind me tonight to take out the bins", "Tue 2025-06-03 20:00", "take out the bins", ""),
    ("remind me this evening to call grandma", "Tue 2025-06-03 19:00", "call grandma", ""),
    ("remind me at noon to eat", "Tue 2025-06-03 12:00", "eat", ""),
    ("remind me at 17:45 to go home", "Tue 2025-06-03 17:45", "go home", ""),
    ("remind me at 10:30pm to sleep", "Tue 2025-06-03 22:30", "sleep", ""),
    ("remind me at 9 to take my pills", "Tue 2025-06-03 21:00", "take my pills", ""),
    ("remind me at 9 in the evening to lock the door", "Tue 2025-06-03 21:00", "lock the door", ""),
    ("set a reminder for 6pm to cook dinner", "Tue 2025-06-03 18:00", "cook dinner", ""),
    ("remind me Tue 17:00 to call mom", "Tue 2025-06-03 17:00", "call mom", ""),
    ("remind me on Friday at 14:30 to submit the form", "Fri 2025-06-06 14:30", "submit the form", ""),
    ("remind me next monday at 10am about the dentist", "Mon 2025-06-09 10:00", "the dentist", ""),
    ("remind me next week to book flights", "Mon 2025-06-09 09:00", "book flights", ""),
    ("remind me on 12 June at 9:15 to renew my passport", "Thu 2025-06-12 09:15", "renew my passport", ""),
    ("remind me on June 12 at 9 to renew", "Thu 2025-06-12 09:00", "renew", ""),
    ("remind me on 2025-07-01 to pay taxes", "Tue 2025-07-01 09:00", "pay taxes", ""),
    ("remind me on the 1st to pay rent", "Tue 2025-07-01 09:00", "pay rent", ""),
    ("remind me that the meeting moved at 3pm", "Tue 2025-06-03 15:00", "the meeting moved", ""),
    ("remind me every Monday at 9 to send the report", "Mon 2025-06-09 09:00", "send the report", "every Monday at 09:00"),
    ("remind me every day at 8am to take vitamins", "Wed 2025-06-04 08:00", "take vitamins", "every day at 08:00"),
    ("remind me every weekday at 7:45 to stand up", "Wed 2025-06-04 07:45", "stand up", "every weekday at 07:45"),
    ("remind me every morning to meditate", "Wed 2025-06-04 09:00", "meditate", "every day at 09:00"),
    ("remind me every Monday and Thursday at 18:00 to go running", "Thu 2025-06-05 18:00", "go running", "every Monday and Thursday at 18:00"),
    ("remind me on mondays at 9 to plan the week", "Mon 2025-06-09 09:00", "plan the week", "every Monday at 09:00"),
    ("remind me every 2 hours to drink water", "Tue 2025-06-03 12:00", "drink water", "every 2 hours"),
]  # fmt: skip


@pytest.mark.parametrize(("request_text", "when", "what", "repeat"), PHRASES)
def test_phrasings_are_read_in_the_users_time_zone(
    request_text: str, when: str, what: str, repeat: str
) -> None:
    parsed = parse_reminder(request_text, NOW.astimezone(UTC), NY)
    assert f"{parsed.first_at.astimezone(NY):%a %Y-%m-%d %H:%M}" == when
    assert parsed.text == what
    assert (describe_recurrence(parsed.recurrence) if parsed.recurrence else "") == repeat


def test_the_table_is_big_enough() -> None:
    assert len(PHRASES) >= 30


@pytest.mark.parametrize(
    "request_text",
    [
        "remind me to call mom",
        "remind me on 2020-01-01 to pay taxes",
        "remind me this morning to x",
    ],
)
def test_unreadable_or_past_times_are_refused_in_plain_words(request_text: str) -> None:
    with pytest.raises(PhraseError, match=r"time|passed"):
        parse_reminder(request_text, NOW.astimezone(UTC), NY)


def test_a_repeating_reminder_keeps_its_local_time_across_the_dst_change() -> None:
    now = datetime(2025, 11, 1, 12, 0, tzinfo=NY).astimezone(UTC)  # Saturday, still EDT
    parsed = parse_reminder("every day at 8am to take vitamins", now, NY)
    assert parsed.recurrence is not None
    times = [parsed.first_at]
    for _ in range(2):
        times.append(next_occurrence(parsed.recurrence, times[-1], NY))
    # Local 08:00 every day, so 12:00 UTC under EDT and 13:00 UTC under EST.
    assert [t.astimezone(UTC).hour for t in times] == [13, 13, 13]
    assert [f"{t.astimezone(NY):%a %H:%M}" for t in times] == [
        "Sun 08:00",
        "Mon 08:00",
        "Tue 08:00",
    ]


def test_the_confirmation_reads_like_the_issue_says() -> None:
    parsed = parse_reminder("remind me at 5pm to call mom", NOW.astimezone(UTC), NY)
    assert confirmation(parsed, "America/New_York", NOW) == "I'll remind you Tue 17:00 to call mom."
    weekly = parse_reminder("every Monday at 9 to send the report", NOW.astimezone(UTC), NY)
    assert confirmation(weekly, "America/New_York", NOW) == (
        "I'll remind you every Monday at 09:00 to send the report (first: Mon 09:00)."
    )


async def test_a_reminder_set_in_chat_fires_once_on_time_and_repeats_weekly(tmp_path: Path) -> None:
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana", timezone="America/New_York")
        jobs = jobs_of(app)
        one = await app.dispatcher.handle(make_inbound("/remind at 5pm to call mom", sender="ana"))
        weekly = await app.dispatcher.handle(
            make_inbound("/remind every Monday at 9 to send the report", sender="ana")
        )
        assert one.reply == "I'll remind you Tue 17:00 to call mom. (#1; /reminders to list)"
        assert weekly.reply is not None and "every Monday at 09:00" in weekly.reply

        await jobs.plan_and_send(clock.set(datetime(2025, 6, 3, 16, 59, tzinfo=NY)))
        assert [m.text for m in fake.sent if m.kind == "reminder"] == []
        for minute in (0, 1, 2):  # 17:00 and two more ticks: once only
            clock.set(datetime(2025, 6, 3, 17, minute, tzinfo=NY))
            await jobs.plan_and_send(clock.now())
        for day in (9, 16):  # two Mondays
            clock.set(datetime(2025, 6, day, 9, 0, tzinfo=NY))
            await jobs.plan_and_send(clock.now())
        listing = await app.dispatcher.handle(make_inbound("/reminders", sender="ana"))
        cancelled = await app.dispatcher.handle(make_inbound("/reminders cancel 2", sender="ana"))
        clock.set(datetime(2025, 6, 23, 9, 0, tzinfo=NY))
        await jobs.plan_and_send(clock.now())
        rows = await deliveries(app, "reminder")

    assert [m.text for m in fake.sent if m.kind == "reminder"] == [
        "⏰ Reminder: call mom",
        "⏰ Reminder: send the report",
        "⏰ Reminder: send the report",
    ]
    assert [r.key for r in rows] == ["reminder:1:1:0", "reminder:1:2:0", "reminder:1:2:1"]
    assert listing.reply == "#2 Mon 23 Jun 09:00 send the report (every Monday at 09:00)"
    assert cancelled.reply == "Cancelled reminder #2: send the report"


async def test_a_reminder_without_a_time_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana")
        result = await app.dispatcher.handle(make_inbound("/remind to call mom", sender="ana"))
        async with app.db.session() as s:
            stored = (await s.exec(select(Reminder))).all()
    assert result.reply is not None and result.reply.startswith("I couldn't find a time in that.")
    assert stored == []


async def test_the_agent_sets_reminders_through_the_deterministic_parser(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana", timezone="America/New_York")
        fake_llm.add(
            call("set_reminder", {"request": "tomorrow morning to water the plants"}),
            say("I'll remind you Wed 09:00 to water the plants."),
        )
        await app.dispatcher.handle(
            make_inbound("remind me tomorrow morning to water the plants", sender="ana")
        )
        tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
        clock.set(datetime(2025, 6, 4, 9, 0, tzinfo=NY))
        await jobs_of(app).plan_and_send(clock.now())
    assert tool_result.startswith("I'll remind you Wed 09:00 to water the plants.")
    assert [m.text for m in fake.sent if m.kind == "reminder"] == ["⏰ Reminder: water the plants"]
