"""/location, /place and the where-was-I tools over a stored week (issue 24)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, timedelta
from pathlib import Path

from bot.agent.tools.base import ToolContext
from bot.app.build import App
from bot.location.geo import Fix
from storage.repos.location import LocationRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.app import add_user
from tests.support.builders import make_inbound
from tests.support.gps import PLACES, WEEK, generate
from tests.support.jobs import jobs_app


async def say(app: App, sender: str, text: str) -> str:
    result = await app.dispatcher.handle(make_inbound(text, sender=sender))
    return result.reply or ""


async def tool(app: App, user_id: int, name: str, **args: str) -> tuple[str, ToolContext]:
    ctx = ToolContext(user_id, app.db, app.clock.now(), "Europe/Berlin")
    text, ok = await app.tools.call(ctx, name, json.dumps(args))
    assert ok, text
    return text, ctx


async def here(app: App, user_id: int, place: str) -> None:
    """The phone reports one fix at ``place`` a little later (as when someone names a place)."""
    assert isinstance(app.clock, ManualClock)
    app.clock.advance(minutes=5)
    await app.location.ingest(user_id, [Fix(app.clock.now(), *PLACES[place], 8.0)], "owntracks")


async def test_places_and_where_was_i_answer_from_stays_for_their_owner_only(
    tmp_path: Path,
) -> None:
    clock = ManualClock(WEEK - timedelta(days=1))
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        bob = await add_user(app, "bob", timezone="Europe/Berlin")
        assert ana.id is not None and bob.id is not None
        assert "before you share" not in await say(app, "ana", "/place add home")
        assert "Location is on" in await say(app, "ana", "/location on")
        fixes, _ = generate(WEEK)
        clock.set(WEEK + timedelta(days=7, hours=1))
        for i in range(0, len(fixes), 500):
            await app.location.ingest(ana.id, fixes[i : i + 500], "overland")

        assert "Saved home" in await say(app, "ana", "/place add home")
        assert "home-like" in await say(app, "ana", "/place home home")
        await here(app, ana.id, "office")
        assert "Saved Office" in await say(app, "ana", "/place add Office")
        await here(app, ana.id, "gym")
        assert "Saved gym" in await say(app, "ana", "/place add gym")
        assert "already have" in await say(app, "ana", "/place add Gym")
        listing = await say(app, "ana", "/place")
        assert "home (home-like)" in listing and "Office" in listing

        text, ctx = await tool(app, ana.id, "where_was_i", when="Tuesday at 3 pm")
        assert "At that moment: [1] At Office, Tue 24 Mar 13:" in text
        assert ctx.sources.entries[1].kind == "stay"
        text, _ = await tool(app, ana.id, "where_was_i", when="on Friday evening")
        # The bar has no name yet: the offline lookup gives the nearest town instead.
        assert "an unnamed place near " in text and ", Germany" in text
        text, _ = await tool(app, ana.id, "last_visit", place="the gym")
        assert "At gym, Thu 26 Mar" in text.splitlines()[1], text
        assert "At gym, Tue 24 Mar" in text.splitlines()[2], text
        assert "Saved: fitness" in await say(app, "ana", "/place rename gym -> fitness")
        text, _ = await tool(app, ana.id, "last_visit", place="fitness")
        assert "At fitness, Thu 26 Mar" in text

        # Bob sees none of it, on any path.
        text, _ = await tool(app, bob.id, "where_was_i", when="Tuesday at 3 pm")
        assert "No stays" in text
        text, _ = await tool(app, bob.id, "last_visit", place="fitness")
        assert "No place is called" in text
        assert "no places" in await say(app, "bob", "/place")
        assert "no place called" in await say(app, "bob", "/place delete fitness")
        assert "Deleted all" in await say(app, "bob", "/location forget all")
        async with app.db.session() as s:
            assert await LocationRepo(s).count_points(ana.id) > 1000

        # Forgetting a day deletes that local day's points and stays, nothing else.
        reply = await say(app, "ana", "/location forget 2026-03-24")
        assert "for 2026-03-24" in reply
        text, _ = await tool(app, ana.id, "where_was_i", when="Tuesday at 3 pm")
        assert "No stays" in text
        text, _ = await tool(app, ana.id, "where_was_i", when="Wednesday at 3 pm")
        assert "At Office" in text
        assert "Usage" in await say(app, "ana", "/location forget")
        assert "Deleted all" in await say(app, "ana", "/location forget all")
        async with app.db.session() as s:
            assert await LocationRepo(s).count_points(ana.id) == 0


async def test_token_only_in_private_and_never_in_the_logs(tmp_path: Path, caplog) -> None:
    clock = ManualClock(WEEK)
    async with jobs_app(tmp_path, clock) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id is not None
        await say(app, "ana", "/location on")
        reply = await say(app, "ana", "/location token")
        assert "/api/location/owntracks" in reply and "lbl_" in reply
        caplog.set_level("INFO")
        await app.location.ingest(ana.id, [Fix(clock.now(), 52.123456, 13.654321, 5)], "x")
        assert "52.12" not in caplog.text and "13.65" not in caplog.text
        assert clock.now().tzinfo == UTC


async def test_raw_points_past_the_retention_go_and_stays_stay(tmp_path: Path) -> None:
    clock = ManualClock(WEEK - timedelta(days=1))
    async with jobs_app(tmp_path, clock, location_retention_days=3) as app:
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id is not None
        await app.location.set_enabled(ana.id, True)
        fixes, _ = generate(WEEK)
        clock.set(WEEK + timedelta(days=7))
        await app.location.ingest(ana.id, fixes, "overland")
        async with app.db.session() as s:
            kept = await LocationRepo(s).points_between(ana.id, WEEK, WEEK + timedelta(days=9))
        oldest, *_ = kept[0]
        assert oldest >= clock.now() - timedelta(days=3)
        stays = await app.location.stays(ana.id, WEEK, WEEK + timedelta(days=1))
        assert len(stays) >= 4  # Monday's stays outlive Monday's points


@asynccontextmanager
async def sharing_ana(tmp_path: Path, place: str) -> AsyncIterator[tuple[App, int]]:
    """An app where ana (Berlin) shares her location and was last seen at ``place``."""
    async with jobs_app(tmp_path, ManualClock(WEEK)) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id is not None
        await say(app, "ana", "/location on")
        await here(app, ana.id, place)
        yield app, ana.id


async def test_location_forget_with_dates_out_of_range_answers_in_plain_words(
    tmp_path: Path,
) -> None:
    async with sharing_ana(tmp_path, "home") as (app, ana_id):
        for dates in (
            "9999-12-31",
            "0001-01-01",
            "0001-01-01 9999-12-31",
            "0000-01-01",
            "2026-02-30",
            "٢٠٢٦-٠٣-٢٤",  # digits of another script
            "99999999999999999999-01-01",
            "2026-03-24 99999-01-01",
        ):
            reply = await say(app, "ana", f"/location forget {dates}")
            plain = ("Usage: /location forget", "is not a date", "Use days from 2000-01-01")
            assert any(words in reply for words in plain), (dates, reply)
            assert "Deleted" not in reply and "went wrong" not in reply, (dates, reply)
        # Nothing was deleted by any of them, and the command still works.
        assert await app.location.last_point(ana_id) is not None
        assert "Deleted your location history for" in await say(
            app, "ana", "/location forget 2000-01-01 2099-12-31"
        )
        assert await app.location.last_point(ana_id) is None


async def test_a_place_name_or_its_other_names_too_long_are_refused_not_cut(
    tmp_path: Path,
) -> None:
    async with sharing_ana(tmp_path, "gym") as (app, _):
        assert "Saved gym" in await say(app, "ana", "/place add gym")
        long_name = "the climbing hall by the river " * 3  # 93 characters

        # /place rename cut it to 60 without a word; /place alias kept any length.
        reply = await say(app, "ana", f"/place rename gym -> {long_name}")
        assert reply == "Keep place names under 60 characters."
        reply = await say(app, "ana", "/place alias gym = " + ", ".join([long_name] * 3))
        assert reply == "Keep a place's other names under 200 characters together."
        assert await say(app, "ana", "/place") == "gym"  # unchanged by either
        assert "Saved: climbing hall, also fitness, box" in await say(
            app, "ana", "/place rename gym -> climbing hall"
        ) + await say(app, "ana", "/place alias climbing hall = fitness, box")
