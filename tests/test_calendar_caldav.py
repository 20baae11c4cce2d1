"""Two-way CalDAV against a real Radicale server on loopback (#16)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from caldav.davclient import DAVClient
from sqlmodel import select
from typer.testing import CliRunner

from bot.app.build import App
from bot.app.cli import app as cli
from bot.errors import CalendarError
from bot.jobs.calendars.caldav import new_key
from storage.models import CalendarSource, Proposal
from storage.repos.calendar import CalendarRepo, title_key
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, fail
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, make_user
from tests.support.radicale import radicale

NOW = datetime(2025, 6, 2, 6, 0, tzinfo=UTC)


def _personal(base: str, user: str, password: str) -> Any:
    """The user's "personal" calendar, made on the server (Any: caldav returns "X | Coroutine")."""
    client: Any = DAVClient(base, username=user, password=password)
    return client.get_principal().make_calendar(name="Personal", cal_id="personal")


def _server_titles(cal: Any) -> dict[str, str]:
    found = {}
    for obj in cal.get_events():
        vevent = obj.icalendar_instance.walk("VEVENT")[0]
        found[str(vevent["UID"])] = str(vevent["SUMMARY"])
    return found


async def _titles(app: App, user_id: int) -> list[str]:
    async with app.db.session() as s:
        return [e.title for e in await CalendarRepo(s).all_events(user_id)]


@pytest.mark.slow
async def test_accepted_events_land_in_radicale_and_its_events_reach_the_briefing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(NOW)
    with radicale(tmp_path / "dav", {"ana": "s3cret-pw", "bob": "bobs-pw"}) as base:
        cal = await asyncio.to_thread(_personal, base, "ana", "s3cret-pw")
        await asyncio.to_thread(
            cal.add_event,
            dtstart=datetime(2025, 6, 2, 15, 0, tzinfo=UTC),
            dtend=datetime(2025, 6, 2, 16, 0, tzinfo=UTC),
            summary="Team offsite",
            uid="offsite@radicale",
        )
        async with jobs_app(
            tmp_path,
            clock,
            fake_llm,
            calendar_key=new_key(),
            llm_max_retries=0,
            calendar_allow_private=True,  # Radicale runs on loopback
        ) as app:
            app.dispatcher.register(RecordingChannel("fake"))
            ana = await make_user(app, "ana")
            assert ana.id is not None
            with pytest.raises(CalendarError, match="refused the user name or password"):
                await app.jobs.calendars.add_caldav(ana, str(cal.url), "ana", "wrong")
            nobody = "http://127.0.0.1:9/ana/personal/"  # the discard port: nothing listens
            with pytest.raises(CalendarError, match=r"could not be reached \(ConnectionError\)"):
                await app.jobs.calendars.add_caldav(ana, nobody, "ana", "s3cret-pw")
            linked = await app.jobs.calendars.add_caldav(ana, str(cal.url), "ana", "s3cret-pw")
            # Linked again: the one calendar stays (a copy read every event in twice).
            again = await app.jobs.calendars.add_caldav(ana, str(cal.url), "ana", "s3cret-pw")

            # A plan from chat, accepted with the Yes button's command, goes to Radicale.
            async with app.db.session() as s:
                proposal = await CalendarRepo(s).add_proposal(
                    Proposal(
                        user_id=ana.id,
                        title="Coffee with Rui",
                        title_key=title_key("Coffee with Rui"),
                        start_at=datetime(2025, 6, 3, 14, 0, tzinfo=UTC),
                        end_at=datetime(2025, 6, 3, 15, 0, tzinfo=UTC),
                        source="chat",
                        created_at=NOW,
                        expires_at=NOW + timedelta(days=7),
                    )
                )
            yes = await app.dispatcher.handle(
                make_inbound(f"/proposal yes {proposal.id}", sender="ana")
            )
            on_server = await asyncio.to_thread(_server_titles, cal)

            # Someone adds an event in their calendar app; /briefing now shows it.
            await asyncio.to_thread(
                cal.add_event,
                dtstart=datetime(2025, 6, 2, 17, 0, tzinfo=UTC),
                dtend=datetime(2025, 6, 2, 17, 30, tzinfo=UTC),
                summary="Call the plumber",
                uid="plumber@radicale",
            )
            fake_llm.add(fail(500))  # the model is down: the briefing lists events itself
            briefing = await app.dispatcher.handle(make_inbound("/briefing now", sender="ana"))
            titles = await _titles(app, ana.id)
            async with app.db.session() as s:
                [source] = (await s.exec(select(CalendarSource))).all()
            listing = await app.jobs.calendars.listing(ana.id)
        db_bytes = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*.db*"))

    assert linked.startswith("Linked CalDAV calendar")
    assert "1 event(s) read" in linked
    assert again.startswith("You already link that CalDAV calendar"), again
    assert yes.reply is not None and yes.reply.startswith("Added: ")
    assert "Coffee with Rui" in on_server.values()
    assert on_server["offsite@radicale"] == "Team offsite"
    assert briefing.reply is not None
    assert "15:00-16:00 Team offsite" in briefing.reply
    assert "17:00-17:30 Call the plumber" in briefing.reply
    # The accepted event read back from Radicale is not doubled.
    assert sorted(titles) == ["Call the plumber", "Coffee with Rui", "Team offsite"]
    assert "CalDAV, two-way" in listing
    # The password is stored sealed: neither the row nor the database file holds it.
    assert source.secret and "s3cret-pw" not in source.secret
    assert b"s3cret-pw" not in db_bytes


async def test_caldav_is_refused_without_a_key_and_a_key_is_made_by_the_cli(
    tmp_path: Path,
) -> None:
    async with jobs_app(tmp_path, ManualClock(NOW)) as app:
        ana = await make_user(app, "ana")
        with pytest.raises(CalendarError, match="LIFEBOT_CALENDAR_KEY"):
            await app.jobs.calendars.add_caldav(ana, "http://127.0.0.1:9/", "ana", "pw")
    made = CliRunner().invoke(cli, ["calendar", "key"])
    assert made.exit_code == 0
    key = made.output.strip().splitlines()[-1].removeprefix("LIFEBOT_CALENDAR_KEY=")
    assert len(key) == 44 and key.endswith("=")


def test_linking_caldav_from_the_cli_refuses_plainly_without_a_key(tmp_path: Path) -> None:
    async def prepare() -> None:
        async with jobs_app(tmp_path, ManualClock(NOW)) as app:
            await make_user(app, "ana")

    asyncio.run(prepare())
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    args = ["calendar", "caldav", "https://dav.example.org/ana/", "--user", "ana"]
    refused = CliRunner().invoke(cli, [*args, "--username", "ana"], env=env, input="pw\n")
    stranger = CliRunner().invoke(cli, [*args[:-1], "zed", "--username", "zed"], env=env)
    assert refused.exit_code == 1
    assert "Not linked: CalDAV needs LIFEBOT_CALENDAR_KEY" in refused.output
    assert stranger.exit_code == 2 and "no user 'zed'" in stranger.output
    # neither was asked for a password it would then throw away
    assert "Password" not in refused.output and "Password" not in stranger.output
