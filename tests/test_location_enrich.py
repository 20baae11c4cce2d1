"""Proposals from stays are titled from the place's history by the fast model (#24)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from sqlmodel import col, select

from bot.app.build import App
from bot.location.geo import Fix
from storage.models import Delivery, Proposal
from storage.repos.calendar import CalendarRepo
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, fail, say
from tests.support.app import add_user
from tests.support.gps import BERLIN, PLACES, stay_at
from tests.support.jobs import jobs_app

MONDAY = datetime(2026, 3, 16, tzinfo=BERLIN)


async def proposals(app: App) -> list[Proposal]:
    async with app.db.session() as s:
        return list((await s.exec(select(Proposal).order_by(col(Proposal.id)))).all())


async def day_with(app: App, day: datetime, *visits: tuple[str, int, int]) -> None:
    """Home in the morning, then (place, start hour, minutes) visits each followed by home."""
    assert isinstance(app.clock, ManualClock)
    app.clock.set(day + timedelta(hours=23, minutes=59))
    fixes = stay_at(PLACES["home"], day + timedelta(hours=7), 60, seed=day.day)
    for n, (where, hour, minutes) in enumerate(visits):
        fixes += stay_at(PLACES[where], day + timedelta(hours=hour), minutes, seed=day.day + n)
        fixes += stay_at(PLACES["home"], day + timedelta(hours=hour, minutes=minutes + 20), 40)
    await app.location.ingest(1, fixes, "owntracks")


async def test_the_fast_model_titles_a_visit_from_earlier_ones_and_never_invents_people(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(MONDAY - timedelta(days=1))
    async with jobs_app(tmp_path, clock, llm=fake_llm) as app:
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id == 1
        await app.location.set_enabled(ana.id, True)
        await app.location.ingest(ana.id, [Fix(clock.now(), *PLACES["home"], 5)], "x")
        for name, kind in (("home", "home"), ("gym", "normal")):
            place = await app.location.add_place(ana.id, name, *PLACES[name])
            place.kind = kind
            await app.location.save_place(place)
        # Last week: a gym visit, and a calendar event there with Ana.
        await day_with(app, MONDAY + timedelta(days=3), ("gym", 18, 80))
        async with app.db.session() as s:
            await CalendarRepo(s).add_or_merge(
                ana.id,
                title="Bouldering with Ana",
                start=MONDAY + timedelta(days=3, hours=18),
                end=MONDAY + timedelta(days=3, hours=19, minutes=20),
                place="Gym",
                people=["Ana"],
                source="manual",
                now=clock.now(),
            )
        tuesday = MONDAY + timedelta(days=8)
        await day_with(app, tuesday, ("gym", 18, 75), ("bar", 20, 60))
        # The model may only name people linked to the place: "Mallory" is dropped.
        fake_llm.add(
            say(json.dumps({"title": "Bouldering with Ana", "people": ["ana", "Mallory"]}))
        )
        await app.location_proposals.scan(clock.set(tuesday + timedelta(hours=21, minutes=35)))
        gym, bar = await proposals(app)
        assert gym.title == "Bouldering with Ana"
        assert gym.people == ["Ana"]
        assert gym.place == "gym"
        assert bar.title.startswith("Time at a new place")  # no history: no model call
        (request,) = fake_llm.chat_requests
        assert request["model"] == "fake-fast"
        history = json.loads(request["messages"][-1]["content"])
        assert history["this_time"].startswith("Tue 2026-03-24 18:")
        assert history["earlier_visits"][0].startswith("Thu 2026-03-19 18:")
        assert history["earlier_events"][0]["people"] == ["Ana"]
        async with app.db.session() as s:
            (push,) = (await s.exec(select(Delivery).where(Delivery.kind == "proposal"))).all()
        assert "1. Bouldering with Ana (gym, 18:" in str(push.payload)
        assert "with Ana?" in str(push.payload)

        # When the model fails, the plain title is used and the scan still proposes.
        thursday = tuesday + timedelta(days=2)
        await day_with(app, thursday, ("gym", 17, 60))
        fake_llm.add(fail(400))
        await app.location_proposals.scan(clock.set(thursday + timedelta(hours=21, minutes=35)))
        latest = (await proposals(app))[-1]
        assert latest.title == "Time at gym, 17:00\u201318:00"
        assert latest.people is None

        # A title that is not words (an object) is no title either: not its JSON.
        saturday = thursday + timedelta(days=2)
        await day_with(app, saturday, ("gym", 10, 60))
        fake_llm.add(say(json.dumps({"title": {"text": "Gym"}, "people": "ana"})))
        await app.location_proposals.scan(clock.set(saturday + timedelta(hours=21, minutes=35)))
        latest = (await proposals(app))[-1]
        assert latest.title == "Time at gym, 10:00\u201311:00"
