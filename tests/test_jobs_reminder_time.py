"""Reminders over time zones and odd times: a move of zone, clocks changing, bad numbers."""

# ruff: noqa: E501  (tables of cases read best one case per line)

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.app.build import App
from bot.jobs.localtime import clock_change_note
from bot.jobs.reminders.phrases import (
    PhraseError,
    describe_recurrence,
    next_occurrence,
    parse_reminder,
)
from bot.jobs.reminders.service import LIST_LINES, MAX_ACTIVE
from storage.models import Reminder
from storage.repos.reminders import ReminderRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, call, say
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, jobs_of, make_user

NY = ZoneInfo("America/New_York")
LISBON = ZoneInfo("Europe/Lisbon")
NOW = datetime(2025, 6, 3, 10, 0, tzinfo=NY)  # Tuesday 10:00 EDT (15:00 in Lisbon)


async def reply_to(app: App, text: str, who: str = "ana") -> str:
    """What lifebot answers ``who``'s chat message ``text`` (a command's reply)."""
    reply = (await app.dispatcher.handle(make_inbound(text, sender=who))).reply
    assert reply is not None
    return reply


def fired(channel: RecordingChannel) -> list[str]:
    """The reminder pushes the user got, in order."""
    return [m.text for m in channel.sent if m.kind == "reminder"]


async def test_repeating_reminders_follow_a_new_time_zone_and_one_offs_keep_their_moment(
    tmp_path: Path, app_database_url: str
) -> None:
    """Set in New York, then moved to Lisbon: 'every day at 8' means 08:00 in Lisbon now."""
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock, database_url_setting=app_database_url) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana", timezone="America/New_York")
        jobs = jobs_of(app)

        await reply_to(app, "/remind every day at 8am to take vitamins")
        await reply_to(app, "/remind every first Monday of the month at 9 to pay rent")
        await reply_to(app, "/remind tomorrow at 11am to call the bank")  # 16:00 in Lisbon
        moved = await reply_to(app, "/tz Europe/Lisbon")
        listing = await reply_to(app, "/reminders")
        for hour in range(6, 18):  # Wednesday in Lisbon, hour by hour
            await jobs.plan_and_send(clock.set(datetime(2025, 6, 4, hour, 0, tzinfo=LISBON)))
        wednesday = fired(fake)
        # The agent's own set_timezone tool changes the zone through the repo: followed too.
        async with app.db.session() as s:
            await UserRepo(s).set_timezone(1, "America/New_York")
        back = await reply_to(app, "/reminders")

    assert "repeating reminders keep their local times" in moved
    assert listing.splitlines() == [
        "#1 Wed 08:00 take vitamins (every day at 08:00)",
        "#3 Wed 16:00 call the bank",
        "#2 Mon 7 Jul 09:00 pay rent (every first Monday of the month at 09:00)",
    ]
    assert wednesday == ["⏰ Reminder: take vitamins", "⏰ Reminder: call the bank"]
    assert back.splitlines()[0] == "#1 Thu 08:00 take vitamins (every day at 08:00)"


async def test_odd_numbers_in_reminder_commands_get_plain_words_and_touch_nothing(
    tmp_path: Path,
) -> None:
    """A superscript id, an id past int64, a reminder a hundred billion days away: answered."""
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana", timezone="America/New_York")
        await make_user(app, "bob", timezone="Europe/Lisbon")

        await reply_to(app, "/remind tomorrow at 9 to water the plants")  # Ana's #1
        replies = {
            text: await reply_to(app, text)
            for text in (
                "/reminders cancel ²",
                "/reminders cancel 99999999999999999999999",
                "/remind in 99999999999 days to retire",
                "/remind in 99999999999999 minutes to retire",
                "/remind every 99999999999 hours to stretch",
            )
        }
        strangers = await reply_to(app, "/reminders cancel 1", "bob")
        still = await reply_to(app, "/reminders")

    assert replies == {
        "/reminders cancel ²": "Usage: /reminders cancel ID (send /reminders to see the ids)",
        "/reminders cancel 99999999999999999999999": (
            "Usage: /reminders cancel ID (send /reminders to see the ids)"
        ),
        "/remind in 99999999999 days to retire": (
            "that is more than two years away; I can only remind you sooner"
        ),
        "/remind in 99999999999999 minutes to retire": (
            "that is more than two years away; I can only remind you sooner"
        ),
        "/remind every 99999999999 hours to stretch": (
            "I can repeat a reminder every 366 days at the longest"
        ),
    }
    assert strangers == "You have no active reminder #1."  # Bob cannot cancel Ana's
    assert still == "#1 Wed 09:00 water the plants"


async def test_a_time_the_clocks_skip_or_repeat_is_explained_in_the_confirmation(
    tmp_path: Path,
) -> None:
    """02:30 on the spring-forward night does not exist; 01:30 on the fall-back night is twice."""
    spring = datetime(2026, 3, 7, 12, 0, tzinfo=NY)  # Saturday; clocks go forward Sunday 02:00
    clock = ManualClock(spring.astimezone(UTC))
    async with jobs_app(tmp_path, clock) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana", timezone="America/New_York")
        jobs = jobs_of(app)

        skipped = await reply_to(app, "/remind tomorrow at 2:30am to take the bread out")
        daily = await reply_to(app, "/remind every day at 2:30am to check the boiler")
        plain = await reply_to(app, "/remind tomorrow at 4am to leave")
        await jobs.plan_and_send(clock.set(datetime(2026, 3, 8, 7, 29, tzinfo=UTC)))
        before = fired(fake)
        await jobs.plan_and_send(clock.set(datetime(2026, 3, 8, 7, 30, tzinfo=UTC)))  # 03:30 EDT
        at_half_three = fired(fake)[len(before) :]

        clock.set(datetime(2026, 10, 31, 12, 0, tzinfo=NY))  # clocks go back Sunday 02:00
        twice = await reply_to(app, "/remind tomorrow at 1:30am to call Tokyo")
        await jobs.plan_and_send(clock.set(datetime(2026, 11, 1, 5, 30, tzinfo=UTC)))  # 01:30 EDT
        first_half_one = fired(fake)[-1]

    assert skipped == (
        "I'll remind you Sun 03:30 to take the bread out. There is no 02:30 on Sun 8 Mar in "
        "your time zone (the clocks go forward an hour), so it comes at 03:30. "
        "(#1; /reminders to list)"
    )
    assert "There is no 02:30 on Sun 8 Mar in your time zone" in daily
    assert "clocks" not in plain
    assert before == []
    assert sorted(at_half_three) == [
        "⏰ Reminder: check the boiler",
        "⏰ Reminder: take the bread out",
    ]
    assert twice == (
        "I'll remind you Sun 01:30 to call Tokyo. 01:30 comes twice on Sun 1 Nov in your time "
        "zone (the clocks go back an hour): I mean the first, before they go back. "
        "(#4; /reminders to list)"
    )
    assert first_half_one == "⏰ Reminder: call Tokyo"


def test_clock_change_words_in_other_zones() -> None:
    """Lisbon jumps at 01:00 and goes back at 02:00; Lord Howe moves its clocks 30 minutes."""
    lisbon_spring = clock_change_note(date(2026, 3, 29), time(1, 30), LISBON)
    lisbon_autumn = clock_change_note(date(2026, 10, 25), time(1, 30), LISBON)
    howe = clock_change_note(date(2026, 10, 4), time(2, 15), ZoneInfo("Australia/Lord_Howe"))
    assert lisbon_spring == (
        "There is no 01:30 on Sun 29 Mar in your time zone (the clocks go forward an hour), "
        "so it comes at 02:30."
    )
    assert lisbon_autumn.startswith("01:30 comes twice on Sun 25 Oct")
    assert howe == (
        "There is no 02:15 on Sun 4 Oct in your time zone (the clocks go forward 30 minutes), "
        "so it comes at 02:45."
    )
    assert clock_change_note(date(2026, 3, 29), time(9), LISBON) == ""


async def test_a_user_with_a_thousand_reminders_is_told_to_cancel_some_and_lists_stay_short(
    tmp_path: Path, app_database_url: str
) -> None:
    """10 000 reminders would list as a hundred chat messages: the list and the count are capped."""
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock, database_url_setting=app_database_url) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        user = await make_user(app, "ana", timezone="America/New_York")
        assert user.id is not None
        async with app.db.session() as s:
            for n in range(MAX_ACTIVE):
                s.add(
                    Reminder(
                        user_id=user.id,
                        text=f"drink water {n}",
                        next_at=NOW.astimezone(UTC) + timedelta(minutes=10 + n),
                        timezone="America/New_York",
                    )
                )

        refused = await reply_to(app, "/remind tomorrow at 9 to call mom")
        listing = await reply_to(app, "/reminders")
        await reply_to(app, "/reminders cancel 1")
        taken = await reply_to(app, "/remind tomorrow at 9 to call mom")
        async with app.db.session() as s:
            active = await ReminderRepo(s).active(user.id)

    assert refused == (
        f"You have {MAX_ACTIVE} reminders waiting, the most I keep. Cancel some first "
        "(/reminders lists them)."
    )
    lines = listing.splitlines()
    assert len(lines) == LIST_LINES + 1
    assert lines[0] == "#1 Tue 10:10 drink water 0"
    assert lines[-1] == f"... and {MAX_ACTIVE - LIST_LINES} more (the web page lists them all)."
    assert taken.startswith("I'll remind you Wed 09:00 to call mom.")
    assert len(active) == MAX_ACTIVE


def test_the_29th_of_february_is_the_next_leap_day_and_the_31st_says_what_months_it_skips() -> None:
    """'on 29 Feb' said in a common year was called 'not a date in the calendar'."""
    now = datetime(2026, 3, 7, 12, 0, tzinfo=NY).astimezone(UTC)
    leap = parse_reminder("remind me on 29 Feb to celebrate", now, NY)
    assert f"{leap.first_at.astimezone(NY):%Y-%m-%d %H:%M}" == "2028-02-29 09:00"
    later = datetime(2026, 2, 1, 12, 0, tzinfo=NY).astimezone(UTC)  # 2028-02-29 is > 2 years
    with pytest.raises(PhraseError, match="more than two years away"):
        parse_reminder("remind me on Feb 29 to celebrate", later, NY)
    monthly = parse_reminder("remind me every month on the 31st to pay rent", now, NY)
    assert monthly.recurrence is not None
    assert describe_recurrence(monthly.recurrence) == (
        "every month on day 31 at 09:00 (months without a day 31 are skipped)"
    )


@pytest.mark.parametrize(
    ("request_text", "first", "words"),
    [
        ("remind me every year on 12 June to renew the insurance", "2026-06-12 09:00", "every year on 12 June at 09:00"),
        ("remind me yearly on June 12 at 8am to renew", "2026-06-12 08:00", "every year on 12 June at 08:00"),
        ("remind me every 3 March at 10:00 about the anniversary", "2027-03-03 10:00", "every year on 3 March at 10:00"),
        ("remind me annually on the 29th of February to celebrate", "2028-02-29 09:00", "every year on 29 February at 09:00 (only in leap years)"),
    ],
)  # fmt: skip
def test_a_yearly_reminder_is_read_and_fires_on_its_day(
    request_text: str, first: str, words: str
) -> None:
    """'every year on 29 Feb' was refused: the repeat could not be read."""
    now = datetime(2026, 3, 7, 12, 0, tzinfo=NY).astimezone(UTC)
    parsed = parse_reminder(request_text, now, NY)
    assert parsed.recurrence is not None
    assert f"{parsed.first_at.astimezone(NY):%Y-%m-%d %H:%M}" == first
    assert describe_recurrence(parsed.recurrence) == words
    again = next_occurrence(parsed.recurrence, parsed.first_at, NY)
    years = 4 if "29" in first else 1
    assert (again.astimezone(NY).year - parsed.first_at.astimezone(NY).year) == years


def test_a_yearly_day_that_no_year_has_is_refused_in_words() -> None:
    """No year has a 31 February (and no stand-in year shows up in the answer)."""
    with pytest.raises(PhraseError, match=r"^31 February is not a day of the year$"):
        parse_reminder("every year on 31 Feb to x", NOW.astimezone(UTC), NY)


async def test_the_assistant_is_told_to_pass_on_the_limit_not_to_ask_for_a_time(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """At the limit, set_reminder's error said '...; ask the user when': a question of time."""
    clock = ManualClock(NOW.astimezone(UTC))
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        user = await make_user(app, "ana", timezone="America/New_York")
        assert user.id is not None
        async with app.db.session() as s:
            for n in range(MAX_ACTIVE):
                s.add(Reminder(user_id=user.id, text=f"r{n}", next_at=NOW + timedelta(days=1)))
        fake_llm.add(
            call("set_reminder", {"request": "tomorrow at 9 to call mom"}),
            say("You have too many reminders."),
        )
        await app.dispatcher.handle(
            make_inbound("remind me tomorrow at 9 to call mom", sender="ana")
        )
        tool_result = str(fake_llm.chat_requests[-1]["messages"][-1]["content"])
    assert f"You have {MAX_ACTIVE} reminders waiting" in tool_result
    assert "ask the user when" not in tool_result
