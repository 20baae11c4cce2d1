"""Reminders over time zones and odd times: a move of zone, clocks changing, bad numbers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, jobs_of, make_user

NY = ZoneInfo("America/New_York")
LISBON = ZoneInfo("Europe/Lisbon")
NOW = datetime(2025, 6, 3, 10, 0, tzinfo=NY)  # Tuesday 10:00 EDT (15:00 in Lisbon)


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

        async def say(text: str) -> str:
            reply = (await app.dispatcher.handle(make_inbound(text, sender="ana"))).reply
            assert reply is not None
            return reply

        await say("/remind every day at 8am to take vitamins")
        await say("/remind every first Monday of the month at 9 to pay rent")
        await say("/remind tomorrow at 11am to call the bank")  # 16:00 in Lisbon
        moved = await say("/tz Europe/Lisbon")
        listing = await say("/reminders")
        for hour in range(6, 18):  # Wednesday in Lisbon, hour by hour
            await jobs.plan_and_send(clock.set(datetime(2025, 6, 4, hour, 0, tzinfo=LISBON)))
        wednesday = fired(fake)
        # The agent's own set_timezone tool changes the zone through the repo: followed too.
        async with app.db.session() as s:
            await UserRepo(s).set_timezone(1, "America/New_York")
        back = await say("/reminders")

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

        async def say(text: str, who: str = "ana") -> str:
            reply = (await app.dispatcher.handle(make_inbound(text, sender=who))).reply
            assert reply is not None
            return reply

        await say("/remind tomorrow at 9 to water the plants")  # Ana's #1
        replies = {
            text: await say(text)
            for text in (
                "/reminders cancel ²",
                "/reminders cancel 99999999999999999999999",
                "/remind in 99999999999 days to retire",
                "/remind in 99999999999999 minutes to retire",
                "/remind every 99999999999 hours to stretch",
            )
        }
        strangers = await say("/reminders cancel 1", "bob")
        still = await say("/reminders")

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
