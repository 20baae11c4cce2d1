"""The evening scan turns the day's stays into proposals with one push a day (#24)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from sqlmodel import col, select

from bot.app.build import App
from bot.location.geo import Fix
from storage.models import Delivery, Proposal
from storage.repos.calendar import CalendarRepo
from tests.fakes.clock import ManualClock
from tests.support.app import add_user
from tests.support.gps import BERLIN, PLACES, WEEK, generate
from tests.support.jobs import jobs_app


async def proposals(app: App) -> list[Proposal]:
    async with app.db.session() as s:
        return list((await s.exec(select(Proposal).order_by(col(Proposal.start_at)))).all())


async def pushes(app: App) -> list[Delivery]:
    async with app.db.session() as s:
        return list((await s.exec(select(Delivery).where(Delivery.kind == "proposal"))).all())


async def test_daily_scan_follows_the_rules_and_pushes_once_a_day(tmp_path: Path) -> None:
    clock = ManualClock(WEEK - timedelta(days=1))
    async with jobs_app(tmp_path, clock) as app:
        ana = await add_user(app, "ana", timezone="Europe/Berlin")
        assert ana.id is not None
        await app.location.set_enabled(ana.id, True)
        fixes, _ = generate(WEEK)
        clock.set(WEEK + timedelta(hours=1))
        for name, kind in (("home", "home"), ("office", "ignored"), ("lunch", "ignored")):
            lat, lon = PLACES[name]
            clock.advance(minutes=1)
            await app.location.ingest(ana.id, [Fix(clock.now(), lat, lon, 5)], "x")
            place = await app.location.add_place(ana.id, name, lat, lon)
            place.kind = kind
            await app.location.save_place(place)
        lat, lon = PLACES["gym"]
        await app.location.add_place(ana.id, "gym", lat, lon)
        await app.location.ingest(ana.id, fixes, "overland")
        async with app.db.session() as s:  # Wednesday's dentist is in the calendar
            await CalendarRepo(s).add_or_merge(
                ana.id,
                title="Dentist",
                start=datetime(2026, 3, 25, 18, tzinfo=BERLIN),
                end=datetime(2026, 3, 25, 18, 30, tzinfo=BERLIN),
                place=None,
                people=None,
                source="manual",
                now=clock.now(),
            )
        scan = app.location_proposals.scan
        # Tuesday 21:00: not yet time.
        assert await scan(clock.set(datetime(2026, 3, 24, 21, tzinfo=BERLIN))) == (
            "proposed 0 from stays"
        )
        # Tuesday 21:35: the gym visit is proposed; home, office and lunch are not.
        await scan(clock.set(datetime(2026, 3, 24, 21, 35, tzinfo=BERLIN)))
        got = await proposals(app)
        assert [p.place for p in got] == ["gym"]
        assert got[0].title.startswith("Time at gym, 17:")
        assert got[0].source == "location"
        assert got[0].expires_at == clock.now() + timedelta(days=7)
        sent = await pushes(app)
        assert len(sent) == 1
        assert "Add to your calendar?" in str(sent[0].payload)
        # The same evening again: nothing new, no second push.
        await scan(clock.advance(minutes=40))
        assert len(await proposals(app)) == 1
        assert len(await pushes(app)) == 1
        # Wednesday: the dentist stay overlaps a timed event, so nothing is proposed, no push.
        await scan(clock.set(datetime(2026, 3, 25, 21, 35, tzinfo=BERLIN)))
        assert len(await proposals(app)) == 1
        assert len(await pushes(app)) == 1
        # Thursday: gym again, one more push.
        await scan(clock.set(datetime(2026, 3, 26, 21, 35, tzinfo=BERLIN)))
        assert [p.place for p in await proposals(app)] == ["gym", "gym"]
        assert len(await pushes(app)) == 2
        # Friday's night out is still going on at 21:35; Saturday's scan splits it at 22:00
        # and drops it (2 h before 22:00 is under the 3-hour minimum). The bar is unknown.
        await scan(clock.set(datetime(2026, 3, 27, 21, 35, tzinfo=BERLIN)))
        await scan(clock.set(datetime(2026, 3, 28, 21, 35, tzinfo=BERLIN)))
        assert [p.place for p in await proposals(app)] == ["gym", "gym"]
        # Yes on a proposal puts it in the calendar through the usual path.
        first = (await proposals(app))[0]
        assert first.id is not None
        reply = await app.jobs.proposals.answer(ana, first.id, True, clock.now())
        assert reply.startswith("Added")
