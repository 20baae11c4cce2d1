"""Settings commands in the chat, and the jobs CLI (briefing preview, calendar export)."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from bot.app.cli import app as cli
from storage.repos.calendar import CalendarRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, make_user

T0 = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)


async def test_schedule_settings_are_commands_with_plain_errors(tmp_path: Path) -> None:
    async with jobs_app(tmp_path, ManualClock(T0)) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        app.dispatcher.register(RecordingChannel("other"))
        await make_user(app, "ana", channels=("fake", "other"))

        async def say(text: str) -> str:
            result = await app.dispatcher.handle(make_inbound(text, sender="ana"))
            assert result.reply is not None
            return result.reply

        replies = [
            await say("/tz new york"),
            await say("/tz Xyzzyplugh"),
            await say("/briefing at 25:00"),
            await say("/briefing at 6:15"),
            await say("/quiet 23:30-06:00"),
            await say("/quiet 9pm"),
            await say("/channel slack"),
            await say("/channel other"),
            await say("/settings"),
            await say("/briefing off"),
        ]
        async with app.db.session() as s:
            user = await UserRepo(s).find_by_name("ana")
    assert replies[0].startswith("Time zone set to America/New_York (local time 08:00).")
    assert replies[1] == (
        "Xyzzyplugh is neither a time zone nor a town I know. Try a bigger town nearby, or a "
        "zone such as /tz Europe/Lisbon."
    )
    assert (
        replies[2]
        == "'25:00' is not a time of day; write it like 07:30. Example: /briefing at 07:30"
    )
    assert replies[3] == (
        "Your morning briefing comes at 06:15 (America/New_York). That is inside your quiet "
        "hours (22:00-07:00), so it will arrive at 07:00."
    )
    assert replies[4].startswith("Quiet hours set to 23:30-06:00 (America/New_York).")
    assert replies[5].startswith("Quiet hours: 23:30-06:00.")
    assert replies[6] == "You have no slack identity linked. Your channels: fake, other."
    assert replies[8] == "tz=America/New_York  briefing 06:15  quiet 23:30-06:00  channel=other"
    assert replies[9].startswith("Morning briefings are off.")
    assert user is not None and not user.briefing_enabled


async def test_times_on_the_twelve_hour_clock_are_read(tmp_path: Path) -> None:
    """ "7am" and "10pm-7am" were "not a time of day": how many people write a time."""
    async with jobs_app(tmp_path, ManualClock(T0)) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana")

        async def say(text: str) -> str:
            result = await app.dispatcher.handle(make_inbound(text, sender="ana"))
            assert result.reply is not None
            return result.reply

        assert (await say("/briefing at 7:30 pm")).startswith(
            "Your morning briefing comes at 19:30"
        )
        assert (await say("/briefing 6am")).startswith("Your morning briefing comes at 06:00")
        assert (await say("/briefing 12 a.m.")).startswith("Your morning briefing comes at 00:00")
        assert (await say("/quiet 10pm-7am")).startswith("Quiet hours set to 22:00-07:00")
        assert (await say("/quiet 11 pm to 6:30 am")).startswith("Quiet hours set to 23:00-06:30")
        assert "'13pm' is not a time of day" in await say("/briefing 13pm")
        assert "'0am' is not a time of day" in await say("/briefing at 0am")
        async with app.db.session() as s:
            user = await UserRepo(s).find_by_name("ana")
    assert user is not None
    assert (user.briefing_time, user.quiet_start, user.quiet_end) == ("00:00", "23:00", "06:30")


def test_briefing_preview_and_calendar_export_from_the_cli(tmp_path: Path) -> None:
    async def prepare() -> None:
        async with jobs_app(tmp_path, ManualClock(datetime.now(UTC))) as app:
            user = await make_user(app, "ana")
            async with app.db.session() as s:
                await CalendarRepo(s).add_or_merge(
                    user.id or 0,
                    title="Dentist",
                    start=datetime(2030, 1, 2, 9, 0, tzinfo=UTC),
                    end=datetime(2030, 1, 2, 10, 0, tzinfo=UTC),
                    place=None,
                    people=None,
                    source="manual",
                    now=datetime.now(UTC),
                )

    asyncio.run(prepare())
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    preview = runner.invoke(cli, ["briefing", "preview", "--user", "ana"], env=env)
    out = tmp_path / "ana.ics"
    export = runner.invoke(cli, ["calendar", "export", "--user", "ana", "-o", str(out)], env=env)
    missing = runner.invoke(cli, ["briefing", "preview", "--user", "bob"], env=env)

    assert preview.exit_code == 0, preview.output
    # The greeting follows ana's local hour (a briefing read at night is not "Good morning").
    assert re.match(r"Good (morning|afternoon|evening), ana!", preview.output)
    assert export.exit_code == 0, export.output
    assert "Wrote 1 event(s)" in export.output
    ics = out.read_text()
    assert "SUMMARY:Dentist" in ics and "DTSTART:20300102T090000Z" in ics
    assert missing.exit_code == 2
    assert "no user 'bob'" in missing.output
