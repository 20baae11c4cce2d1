"""The evening scan runs at each user's own local time; quiet hours hold its push (#24)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlmodel import col, select

from bot.location.geo import Fix
from bot.messages import OutboundMessage
from storage.models import Place, Proposal
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.app import add_user
from tests.support.builders import make_inbound
from tests.support.gps import stay_at
from tests.support.jobs import jobs_app

NEW_YORK = ZoneInfo("America/New_York")
HALL = (40.7306, -73.9866)
HOME = (40.7484, -73.9857)


async def test_scan_time_is_per_user_local_and_quiet_hours_hold_the_push(tmp_path: Path) -> None:
    day = datetime(2026, 3, 24, tzinfo=NEW_YORK)
    clock = ManualClock(day - timedelta(hours=1))
    async with jobs_app(tmp_path, clock) as app:
        channel = RecordingChannel("fake")
        app.dispatcher.register(channel)
        ana = await add_user(app, "ana", timezone="America/New_York")
        assert ana.id is not None

        def pushes() -> list[OutboundMessage]:
            return [m for m in channel.sent if m.kind == "proposal"]

        async def say(text: str) -> str:
            return (await app.dispatcher.handle(make_inbound(text, sender="ana"))).reply or ""

        await say("/location on")
        assert "Evening proposals at 21:30" in await say("/location")
        assert "Usage: /location scan 21:30" in await say("/location scan 25:00")
        assert "at 23:15 your time" in await say("/location scan 23:15")
        await app.location.ingest(ana.id, [Fix(clock.now(), *HOME, 5)], "x")
        home = await app.location.add_place(ana.id, "home", *HOME)
        home.kind = "home"
        await app.location.save_place(home)
        clock.set(day + timedelta(hours=20))
        fixes = stay_at(HOME, day + timedelta(hours=8), 60)
        fixes += stay_at(HALL, day + timedelta(hours=14), 100)
        fixes += stay_at(HOME, day + timedelta(hours=16), 120)
        await app.location.ingest(ana.id, fixes, "owntracks")

        scan = app.location_proposals.scan
        # 21:35 in New York (01:35 UTC the next day): not yet her time.
        assert await scan(clock.set(day + timedelta(hours=21, minutes=35))) == (
            "proposed 0 from stays"
        )
        # 23:20: proposed, but 23:20 is inside her quiet hours (22:00-07:00): the push waits.
        assert await scan(clock.set(day + timedelta(hours=23, minutes=20))) == (
            "proposed 1 from stays"
        )
        await app.jobs.outbox.run_due(clock.now())
        assert pushes() == []
        # A message she sends before the push arrives is not taken as the place's name.
        await say("Kiezbar")
        async with app.db.session() as s:
            assert list((await s.exec(select(Place).where(Place.name == "Kiezbar"))).all()) == []
        # At 07:00 the push goes out; then her answer names the place.
        morning = day + timedelta(days=1, hours=7, minutes=1)
        await app.jobs.outbox.run_due(clock.set(morning))
        assert len(pushes()) == 1 and "What was this place?" in pushes()[0].text
        # Speech the pendant overhears in the room does not answer for her.
        heard = make_inbound("Kiezbar", sender="ana")
        heard.overheard = True
        await app.dispatcher.handle(heard)
        assert (await say("Climbing hall")).startswith("Saved Climbing hall")
        async with app.db.session() as s:
            (p,) = (await s.exec(select(Proposal).order_by(col(Proposal.id)))).all()
        assert p.title == "Time at Climbing hall, 14:00\u201315:40"
        # Back to the default.
        assert "at 21:30 your time" in await say("/location scan default")


async def test_the_evening_scan_fires_at_the_set_time_not_on_the_next_poll(
    tmp_path: Path,
) -> None:
    day = datetime(2026, 3, 24, tzinfo=NEW_YORK)
    clock = ManualClock(day + timedelta(hours=12))
    async with jobs_app(tmp_path, clock) as app:
        ana = await add_user(app, "ana", timezone="America/New_York")
        assert ana.id is not None
        await app.dispatcher.handle(make_inbound("/location on", sender="ana"))
        await app.dispatcher.handle(make_inbound("/location scan 20:15", sender="ana"))
        fixes = stay_at(HALL, day + timedelta(hours=14), 100)
        fixes += stay_at(HOME, day + timedelta(hours=16), 120)
        await app.location.ingest(ana.id, fixes, "owntracks")
        timer = app.jobs.service.timer
        assert timer is not None
        # The leader's timer sleeps until 20:15 her time exactly.
        assert await timer.next_due(clock.now()) == day + timedelta(hours=20, minutes=15)
        runner = asyncio.create_task(timer.run_forever())
        try:
            clock.set(day + timedelta(hours=20, minutes=15, seconds=1))
            async with asyncio.timeout(10):  # the poll would take up to 300 s
                while True:
                    async with app.db.session() as s:
                        made = (await s.exec(select(Proposal))).all()
                    if made:
                        break
                    await asyncio.sleep(0.05)
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        assert made and {p.source for p in made} == {"location"}
        # Done for today: the next scan is tomorrow's.
        tomorrow = await timer.next_due(clock.now())
        assert tomorrow == day + timedelta(days=1, hours=20, minutes=15)
