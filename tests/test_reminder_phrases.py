"""Repeating reminders as recurrence rules, the fixed misparses, numeric dates in the user's
order, in two time zones across their daylight-saving changes (#16)."""

# ruff: noqa: E501  (tables of cases read best one case per line)

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.retrieval.timeparse import parse_time
from bot.jobs.localtime import day_first
from bot.jobs.reminders.phrases import (
    PhraseError,
    describe_recurrence,
    next_occurrence,
    parse_reminder,
)
from bot.jobs.reminders.service import confirmation
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, make_user

LISBON = ZoneInfo("Europe/Lisbon")  # clocks go back Sun 26 Oct 2025
NEW_YORK = ZoneInfo("America/New_York")  # clocks go back Sun 2 Nov 2025
ZONES = [LISBON, NEW_YORK]


def friday(tz: ZoneInfo) -> datetime:
    """Friday 24 Oct 2025, 15:00 local: both zones' clock changes are ahead."""
    return datetime(2025, 10, 24, 15, 0, tzinfo=tz).astimezone(UTC)


# (request, first time local "Day YYYY-MM-DD HH:MM", what, repeat in words or "")
# The same local answer in both zones; numeric dates here can be read only one way.
TABLE = [
    ("remind me on 31/12 at 23:00 to toast", "Wed 2025-12-31 23:00", "toast", ""),
    ("remind me sunday at 10 to call dad", "Sun 2025-10-26 10:00", "call dad", ""),
    ("remind me friday at 9 to send the report", "Fri 2025-10-31 09:00", "send the report", ""),
    ("remind me friday at 4 to leave early", "Fri 2025-10-24 16:00", "leave early", ""),
    ("remind me every first Monday of the month at 9 to pay rent", "Mon 2025-11-03 09:00", "pay rent", "every first Monday of the month at 09:00"),
    ("remind me every weekday at 8:30 to stand up", "Mon 2025-10-27 08:30", "stand up", "every weekday at 08:30"),
    ("remind me every 2 weeks on Friday to clean the bathroom", "Fri 2025-11-07 09:00", "clean the bathroom", "every 2 weeks on Friday at 09:00"),
    ("remind me every other Tuesday at 18:00 to play football", "Tue 2025-10-28 18:00", "play football", "every 2 weeks on Tuesday at 18:00"),
    ("remind me every last Friday of the month at 18:00 for drinks", "Fri 2025-10-31 18:00", "drinks", "every last Friday of the month at 18:00"),
    ("remind me on the 15th of every month to send invoices", "Sat 2025-11-15 09:00", "send invoices", "every month on day 15 at 09:00"),
    ("remind me every 3 days to water the cactus", "Mon 2025-10-27 09:00", "water the cactus", "every 3 days at 09:00"),
    ("remind me every fortnight on Monday at 7am to take out recycling", "Mon 2025-10-27 07:00", "take out recycling", "every 2 weeks on Monday at 07:00"),
    ("remind me on the second Wednesday of each month at 19:30 about book club", "Wed 2025-11-12 19:30", "book club", "every second Wednesday of the month at 19:30"),
    ("remind me every third Thursday of the month at noon to call grandma", "Thu 2025-11-20 12:00", "call grandma", "every third Thursday of the month at 12:00"),
    ("remind me on 1/1/2026 at 10 to plan the year", "Thu 2026-01-01 10:00", "plan the year", ""),
    ("remind me on 25.12.2025 at 8am to open presents", "Thu 2025-12-25 08:00", "open presents", ""),
    ("remind me on 24/12 at 18:00 to wrap gifts", "Wed 2025-12-24 18:00", "wrap gifts", ""),
    ("remind me on 13/11 at 9:15 to renew the passport", "Thu 2025-11-13 09:15", "renew the passport", ""),
    ("remind me on Saturday at 11 to buy flowers", "Sat 2025-10-25 11:00", "buy flowers", ""),
    ("remind me at 23:30 to lock up", "Fri 2025-10-24 23:30", "lock up", ""),
    ("remind me in 90 minutes to stretch", "Fri 2025-10-24 16:30", "stretch", ""),
    ("remind me tomorrow at 7:15 to run", "Sat 2025-10-25 07:15", "run", ""),
    ("remind me on Monday morning to call the garage", "Mon 2025-10-27 09:00", "call the garage", ""),
    ("remind me next sunday at 8pm to prepare the week", "Sun 2025-10-26 20:00", "prepare the week", ""),
    ("remind me on 3 November at 9 to pay the car tax", "Mon 2025-11-03 09:00", "pay the car tax", ""),
    ("remind me every Sunday at 9pm to plan the week", "Sun 2025-10-26 21:00", "plan the week", "every Sunday at 21:00"),
    ("remind me every weekend at 10 to call mom", "Sat 2025-10-25 10:00", "call mom", "every Saturday and Sunday at 10:00"),
    ("remind me every day at 7 to take vitamins", "Sat 2025-10-25 07:00", "take vitamins", "every day at 07:00"),
    ("remind me each Tuesday and Thursday at 6:30pm to go to the gym", "Tue 2025-10-28 18:30", "go to the gym", "every Tuesday and Thursday at 18:30"),
    ("remind me every 30 minutes to drink water", "Fri 2025-10-24 15:30", "drink water", "every 30 minutes"),
    ("remind me on the 1st of every month to pay rent", "Sat 2025-11-01 09:00", "pay rent", "every month on day 1 at 09:00"),
    ("remind me every month on the 28th at 8 to check the budget", "Tue 2025-10-28 08:00", "check the budget", "every month on day 28 at 08:00"),
    ("remind me every 2 weeks on Thursday at 10:00 to water the ferns", "Thu 2025-10-30 10:00", "water the ferns", "every 2 weeks on Thursday at 10:00"),
    ("remind me in 2 weeks to call the plumber", "Fri 2025-11-07 15:00", "call the plumber", ""),
    ("remind me on 2025-11-02 at 12:00 to check the clocks", "Sun 2025-11-02 12:00", "check the clocks", ""),
    ("remind me the day after tomorrow at 6pm to pick up the suit", "Sun 2025-10-26 18:00", "pick up the suit", ""),
]  # fmt: skip


@pytest.mark.parametrize("tz", ZONES, ids=["Lisbon", "New_York"])
@pytest.mark.parametrize(("request_text", "when", "what", "repeat"), TABLE)
def test_the_phrase_table_in_two_zones(
    tz: ZoneInfo, request_text: str, when: str, what: str, repeat: str
) -> None:
    parsed = parse_reminder(request_text, friday(tz), tz, day_first=day_first(None, tz.key))
    assert f"{parsed.first_at.astimezone(tz):%a %Y-%m-%d %H:%M}" == when
    assert parsed.text == what
    assert (describe_recurrence(parsed.recurrence) if parsed.recurrence else "") == repeat


def test_the_table_adds_at_least_thirty_phrasings() -> None:
    assert len(TABLE) >= 30


@pytest.mark.parametrize(
    ("order", "zone", "when"),
    [
        (None, LISBON, "Mon 2025-11-03 09:00"),  # Portugal writes the day first
        (None, NEW_YORK, "Wed 2026-03-11 09:00"),  # the United States the month first
        ("mdy", LISBON, "Wed 2026-03-11 09:00"),  # the user's own setting wins
        ("dmy", NEW_YORK, "Mon 2025-11-03 09:00"),
    ],
)
def test_an_ambiguous_numeric_date_follows_the_users_date_order(
    order: str | None, zone: ZoneInfo, when: str
) -> None:
    parsed = parse_reminder(
        "remind me on 3/11 at 9 to call the bank",
        friday(zone),
        zone,
        day_first=day_first(order, zone.key),
    )
    assert f"{parsed.first_at.astimezone(zone):%a %Y-%m-%d %H:%M}" == when


@pytest.mark.parametrize(
    ("tz", "now", "when"),
    [
        (LISBON, datetime(2025, 10, 26, 15, 0, tzinfo=LISBON), "Sun 2025-11-02 10:00"),
        (NEW_YORK, datetime(2025, 11, 2, 15, 0, tzinfo=NEW_YORK), "Sun 2025-11-09 10:00"),
    ],
)
def test_sunday_at_10_said_on_a_sunday_afternoon_is_next_sunday_morning(
    tz: ZoneInfo, now: datetime, when: str
) -> None:
    parsed = parse_reminder("remind me sunday at 10 to call dad", now.astimezone(UTC), tz)
    assert f"{parsed.first_at.astimezone(tz):%a %Y-%m-%d %H:%M}" == when


@pytest.mark.parametrize(
    ("tz", "said", "weekdays", "utc_hours"),
    [
        # 08:30 local from Thu 23 Oct: UTC+1, then UTC+0 after Lisbon's change on Sun 26 Oct...
        (LISBON, 22, [3, 4, 0, 1, 2, 3, 4, 0], [7, 7, 8, 8, 8, 8, 8, 8]),
        # ...and from Mon 27 Oct: EDT, then EST after New York's change on Sun 2 Nov.
        (NEW_YORK, 24, [0, 1, 2, 3, 4, 0, 1, 2], [12, 12, 12, 12, 12, 13, 13, 13]),
    ],
    ids=["Lisbon", "New_York"],
)
def test_repeats_keep_their_local_time_across_the_dst_change(
    tz: ZoneInfo, said: int, weekdays: list[int], utc_hours: list[int]
) -> None:
    now = datetime(2025, 10, said, 15, 0, tzinfo=tz).astimezone(UTC)
    parsed = parse_reminder("every weekday at 8:30 to stand up", now, tz)
    assert parsed.recurrence is not None
    times = [parsed.first_at]
    while len(times) < 8:
        times.append(next_occurrence(parsed.recurrence, times[-1], tz))
    assert {f"{t.astimezone(tz):%H:%M}" for t in times} == {"08:30"}
    assert [t.astimezone(tz).weekday() for t in times] == weekdays
    assert [t.astimezone(UTC).hour for t in times] == utc_hours
    monthly = parse_reminder("every first Monday of the month at 9 to pay rent", friday(tz), tz)
    assert monthly.recurrence is not None
    later = [monthly.first_at]
    for _ in range(2):
        later.append(next_occurrence(monthly.recurrence, later[-1], tz))
    assert [f"{t.astimezone(tz):%a %d %b %H:%M}" for t in later] == [
        "Mon 03 Nov 09:00",
        "Mon 01 Dec 09:00",
        "Mon 05 Jan 09:00",
    ]


@pytest.mark.parametrize(
    ("request_text", "says"),
    [
        ("remind me every year to call aunt Rosa", "won't set it just once"),  # which day?
        ("remind me monthly to pay the bills", "won't set it just once"),
        ("remind me each spring to clean the windows", "won't set it just once"),
        ("remind me on 31/02 at 9 to x", "not a date"),
        ("remind me on 13/13 to x", "not a date"),
    ],
)
def test_a_repeat_that_cannot_be_read_is_refused_not_set_once(request_text: str, says: str) -> None:
    with pytest.raises(PhraseError, match=says):
        parse_reminder(request_text, friday(LISBON), LISBON)


@pytest.mark.parametrize(
    "request_text",
    [
        "yesterday at 9 to run",
        "remind me yesterday at 9 to run",
        "remind me to run yesterday at 9pm",
        "at 9 yesterday, call mum",
        "remind me last monday at 8 to pay rent",
        "remind me 2 hours ago to stretch",
        "remind me 10:30 last night to lock up",
        "the day before yesterday at 7 water the plants",
    ],
)
def test_a_time_in_the_past_is_refused_not_moved_to_today(request_text: str) -> None:
    with pytest.raises(PhraseError, match="is in the past, so I can't remind you then"):
        parse_reminder(request_text, friday(LISBON), LISBON)


@pytest.mark.parametrize(
    ("request_text", "task"),
    [
        ("remind me tomorrow at 9 to tell Ana what happened yesterday", "tell Ana"),
        ("remind me at 5pm to ask about yesterday's meeting", "ask about yesterday's meeting"),
        ("in 2 hours remind me to reply to last week's email", "reply to last week's email"),
    ],
)
def test_a_past_day_the_task_mentions_is_not_its_time(request_text: str, task: str) -> None:
    parsed = parse_reminder(request_text, friday(LISBON), LISBON)
    assert task in parsed.text
    assert parsed.first_at > friday(LISBON)


def test_a_repeating_reminder_is_confirmed_in_words() -> None:
    now = friday(LISBON)
    parsed = parse_reminder("every first Monday of the month at 9 to pay rent", now, LISBON)
    assert confirmation(parsed, "Europe/Lisbon", now) == (
        "I'll remind you every first Monday of the month at 09:00 to pay rent "
        "(first: Mon 3 Nov 09:00)."
    )


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("what did I do since Monday?", "Mon 20 Oct 2025 to Fri 24 Oct 2025"),
        ("who did I meet since last Tuesday", "Tue 21 Oct 2025 to Fri 24 Oct 2025"),
        ("what happened between 1 and 5 June", "Sun 01 Jun 2025 to Thu 05 Jun 2025"),
        ("what did I spend from 3 to 7 October", "Fri 03 Oct 2025 to Tue 07 Oct 2025"),
        ("what did we say on Monday", "Mon 20 Oct 2025"),
    ],
)
def test_since_and_between_name_the_whole_span(question: str, window: str) -> None:
    parsed = parse_time(question, friday(LISBON), LISBON)
    assert parsed.window is not None
    assert parsed.window.describe(LISBON) == window


async def test_dates_command_sets_the_order_and_reminders_follow_it(tmp_path: Path) -> None:
    clock = ManualClock(friday(NEW_YORK))
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana", timezone="America/New_York")

        async def say(text: str) -> str:
            result = await app.dispatcher.handle(make_inbound(text, sender="ana"))
            assert result.reply is not None
            return result.reply

        asked = await say("/dates")
        before = await say("/remind on 3/11 at 9 to call the bank")
        changed = await say("/dates day-first")
        after = await say("/remind on 3/11 at 9 to call the bank")
        every = await say("/remind every 2 weeks on Friday at 17:00 to pay the cleaner")
    assert asked.startswith("I read 3/4 as March 4.")
    assert before.startswith("I'll remind you Wed 11 Mar 09:00 to call the bank")
    assert changed == "OK: I read 3/4 as 3 April in your reminders."
    assert after.startswith("I'll remind you Mon 3 Nov 09:00 to call the bank")
    assert every.startswith(
        "I'll remind you every 2 weeks on Friday at 17:00 to pay the cleaner (first: Fri 17:00)."
    )


async def test_slash_remind_me_sets_what_follows_not_me(tmp_path: Path) -> None:
    """'/remind me tomorrow at 7pm to call mum' was set as "me to call mum"."""
    async with jobs_app(tmp_path, ManualClock(friday(LISBON))) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana", timezone="Europe/Lisbon")
        for said, what in (
            ("/remind me tomorrow at 7pm to call mum", "call mum"),
            ("/remind me in 20 minutes to stretch", "stretch"),
            ("/remind me to water the plants at 8pm", "water the plants"),
        ):
            result = await app.dispatcher.handle(make_inbound(said, sender="ana"))
            assert result.reply is not None and f" to {what}. (#" in result.reply, result.reply
            assert "me to" not in result.reply, result.reply
