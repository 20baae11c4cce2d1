"""`lifebot calendar import FILE.ics`: events from a file, in answers, briefings and the stay
scan (#16, #24)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlmodel import col, select
from typer.testing import CliRunner

from bot.app.build import App
from bot.app.cli import app as cli
from bot.location.geo import Fix
from storage.models import Proposal
from storage.repos.calendar import CalendarRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, call, fail, say
from tests.support.app import add_user
from tests.support.builders import make_inbound
from tests.support.gps import BERLIN, PLACES, WEEK, generate
from tests.support.jobs import jobs_app, make_user

LISBON_ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VTIMEZONE\r
TZID:Europe/Lisbon\r
BEGIN:STANDARD\r
DTSTART:19701025T020000\r
TZOFFSETFROM:+0100\r
TZOFFSETTO:+0000\r
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r
END:STANDARD\r
BEGIN:DAYLIGHT\r
DTSTART:19700329T010000\r
TZOFFSETFROM:+0000\r
TZOFFSETTO:+0100\r
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r
END:DAYLIGHT\r
END:VTIMEZONE\r
BEGIN:VEVENT\r
UID:standup@example.com\r
DTSTAMP:20250101T000000Z\r
DTSTART;TZID=Europe/Lisbon:20250602T093000\r
DTEND;TZID=Europe/Lisbon:20250602T094500\r
RRULE:FREQ=WEEKLY;BYDAY=MO,TH;COUNT=6\r
EXDATE;TZID=Europe/Lisbon:20250609T093000\r
SUMMARY:Stand-up\r
LOCATION:Room 4\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:standup@example.com\r
DTSTAMP:20250101T000000Z\r
RECURRENCE-ID;TZID=Europe/Lisbon:20250605T093000\r
DTSTART;TZID=Europe/Lisbon:20250605T110000\r
DTEND;TZID=Europe/Lisbon:20250605T111500\r
SUMMARY:Stand-up (moved)\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:holiday@example.com\r
DTSTAMP:20250101T000000Z\r
DTSTART;VALUE=DATE:20250610\r
DTEND;VALUE=DATE:20250611\r
SUMMARY:Portugal Day\r
END:VEVENT\r
END:VCALENDAR\r
"""

NOW = datetime(2025, 6, 2, 6, 0, tzinfo=UTC)  # Monday 07:00 in Lisbon


async def _events(app: App, user_id: int) -> list[tuple[str, str, bool]]:
    async with app.db.session() as s:
        rows = await CalendarRepo(s).all_events(user_id)
    return [(e.title, f"{e.start_at:%Y-%m-%d %H:%M}", e.all_day) for e in rows]


async def test_an_ics_file_expands_recurrences_and_reimports_without_doubles(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with jobs_app(tmp_path, ManualClock(NOW), fake_llm, llm_max_retries=0) as app:
        channel = RecordingChannel("fake")
        app.dispatcher.register(channel)
        ana = await make_user(app, "ana", timezone="Europe/Lisbon")
        bob = await make_user(app, "bob", timezone="Europe/Lisbon")
        assert ana.id is not None and bob.id is not None
        first = await app.jobs.calendars.import_file(ana, LISBON_ICS.encode())
        again = await app.jobs.calendars.import_file(ana, LISBON_ICS.encode())
        rows = await _events(app, ana.id)

        # "what do I have on Thursday?" reaches the events through the agent's tool.
        fake_llm.add(
            call("list_events", {"start_date": "2025-06-05", "days": 1}),
            say("At 11:00 the moved stand-up."),
        )
        await app.dispatcher.handle(make_inbound("what do I have on Thursday?", sender="ana"))
        tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
        week = await app.dispatcher.handle(make_inbound("/calendar", sender="ana"))
        bobs = await _events(app, bob.id)
        fake_llm.add(fail(500))  # the model is down: the briefing lists events itself
        body, _ = await app.jobs.briefings.compose(ana, NOW)

    # Six Monday/Thursday stand-ups less the 9 June exception: five, one moved (times in
    # UTC: Lisbon summer time is UTC+1). The all-day holiday is Lisbon midnight to midnight.
    assert rows == [
        ("Stand-up", "2025-06-02 08:30", False),
        ("Stand-up (moved)", "2025-06-05 10:00", False),
        ("Portugal Day", "2025-06-09 23:00", True),
        ("Stand-up", "2025-06-12 08:30", False),
        ("Stand-up", "2025-06-16 08:30", False),
        ("Stand-up", "2025-06-19 08:30", False),
    ]
    assert (first.added, first.updated) == (6, 0)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 6)
    assert "Thu 5 Jun 11:00-11:15 Stand-up (moved)" in tool_result
    assert "09:30" not in tool_result
    assert week.reply is not None
    assert "Mon 2 Jun 09:30-09:45 Stand-up (Room 4)" in week.reply
    assert "all day Portugal Day" not in week.reply  # 10 June is more than 7 days ahead
    assert "09:30-09:45 Stand-up (Room 4)" in body  # the morning briefing lists it
    assert bobs == []  # one user's import never shows in another's calendar


async def test_a_changed_file_updates_the_same_rows(tmp_path: Path) -> None:
    async with jobs_app(tmp_path, ManualClock(NOW)) as app:
        ana = await make_user(app, "ana", timezone="Europe/Lisbon")
        assert ana.id is not None
        await app.jobs.calendars.import_file(ana, LISBON_ICS.encode())
        changed = LISBON_ICS.replace("SUMMARY:Portugal Day", "SUMMARY:Dia de Portugal")
        counts = await app.jobs.calendars.import_file(ana, changed.encode())
        titles = [t for t, _, _ in await _events(app, ana.id)]
    assert (counts.added, counts.updated, counts.unchanged) == (0, 1, 5)
    assert titles.count("Dia de Portugal") == 1
    assert "Portugal Day" not in titles


def test_calendar_import_from_the_cli_with_plain_errors(tmp_path: Path) -> None:
    async def prepare() -> None:
        async with jobs_app(tmp_path, ManualClock(datetime.now(UTC))) as app:
            await make_user(app, "ana")

    asyncio.run(prepare())
    now = datetime.now(UTC) + timedelta(days=2)
    good = tmp_path / "cal.ics"
    good.write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:a@t\r\nDTSTAMP:20250101T000000Z\r\nDTSTART:{now:%Y%m%dT%H%M00Z}\r\n"
        f"DTEND:{now + timedelta(hours=1):%Y%m%dT%H%M00Z}\r\nSUMMARY:Dentist\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    bad = tmp_path / "notes.ics"
    bad.write_text("shopping list: milk, eggs\n")
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    once = runner.invoke(cli, ["calendar", "import", str(good), "--user", "ana"], env=env)
    twice = runner.invoke(cli, ["calendar", "import", str(good), "--user", "ana"], env=env)
    broken = runner.invoke(cli, ["calendar", "import", str(bad), "--user", "ana"], env=env)
    missing = runner.invoke(
        cli, ["calendar", "import", str(tmp_path / "nope.ics"), "--user", "ana"], env=env
    )
    stranger = runner.invoke(cli, ["calendar", "import", str(good), "--user", "zed"], env=env)

    async def stored() -> list[str]:
        async with (
            jobs_app(tmp_path, ManualClock(datetime.now(UTC))) as app,
            app.db.session() as s,
        ):
            user = await UserRepo(s).find_by_name("ana")
            assert user is not None and user.id is not None
            return [e.title for e in await CalendarRepo(s).all_events(user.id)]

    assert once.exit_code == 0, once.output
    assert "1 new, 0 changed, 0 removed, 0 unchanged" in once.output
    assert "0 new, 0 changed, 0 removed, 1 unchanged" in twice.output
    assert broken.exit_code == 1
    assert "not an iCalendar file" in broken.output
    assert missing.exit_code == 1 and "Cannot read" in missing.output
    assert stranger.exit_code == 2 and "no user 'zed'" in stranger.output
    assert asyncio.run(stored()) == ["Dentist"]


def _ics(*events: str) -> bytes:
    body = "".join(events)
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{body}END:VCALENDAR\r\n".encode()


def _vevent(uid: str, start: str, end: str, title: str) -> str:
    return (
        f"BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20260101T000000Z\r\n{start}\r\n{end}\r\n"
        f"SUMMARY:{title}\r\nEND:VEVENT\r\n"
    )


async def test_imported_timed_events_block_stays_and_all_day_events_do_not(
    tmp_path: Path,
) -> None:
    clock = ManualClock(WEEK - timedelta(days=1))
    async with jobs_app(tmp_path, clock) as app:
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id is not None
        await app.location.set_enabled(ana.id, True)
        fixes, _ = generate(WEEK)
        clock.set(WEEK + timedelta(hours=1))
        for name in ("home", "office", "lunch"):
            lat, lon = PLACES[name]
            clock.advance(minutes=1)
            await app.location.ingest(ana.id, [Fix(clock.now(), lat, lon, 5)], "x")
            place = await app.location.add_place(ana.id, name, lat, lon)
            place.kind = "home" if name == "home" else "ignored"
            await app.location.save_place(place)
        lat, lon = PLACES["gym"]
        await app.location.add_place(ana.id, "gym", lat, lon)
        await app.location.ingest(ana.id, fixes, "overland")
        # Tuesday is an all-day conference (does not block the gym); Wednesday's dentist and
        # Thursday's climbing class are timed events from the file over those stays.
        await app.jobs.calendars.import_file(
            ana,
            _ics(
                _vevent(
                    "conf@t",
                    "DTSTART;VALUE=DATE:20260324",
                    "DTEND;VALUE=DATE:20260325",
                    "Conference",
                ),
                _vevent(
                    "dentist@t",
                    "DTSTART:20260325T170000Z",
                    "DTEND:20260325T173000Z",
                    "Dentist",
                ),
                _vevent(
                    "class@t",
                    "DTSTART;TZID=Europe/Berlin:20260326T163000",
                    "DTEND;TZID=Europe/Berlin:20260326T200000",
                    "Climbing class",
                ),
            ),
        )
        scan = app.location_proposals.scan
        await scan(clock.set(datetime(2026, 3, 24, 21, 35, tzinfo=BERLIN)))
        tuesday = await _proposals(app)
        await scan(clock.set(datetime(2026, 3, 26, 21, 35, tzinfo=BERLIN)))
        thursday = await _proposals(app)
    assert [(p.place, p.start_at.astimezone(BERLIN).day) for p in tuesday] == [("gym", 24)]
    # Wednesday's and Thursday's stays are covered by timed events: nothing new.
    assert [(p.place, p.start_at.astimezone(BERLIN).day) for p in thursday] == [("gym", 24)]


async def _proposals(app: App) -> list[Proposal]:
    async with app.db.session() as s:
        return list((await s.exec(select(Proposal).order_by(col(Proposal.start_at)))).all())
