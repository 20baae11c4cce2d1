"""The evening scan across a daylight-saving change, in two time zones (#24).

Clocks go forward in New York on 8 March 2026 and in Berlin on 29 March 2026 (both Sundays).
The scan still runs once per local day at local 21:30, a Saturday stay that runs through the
change is cut at local 22:00, and titles show local wall-clock times.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import col, select

from bot.location.geo import Fix
from storage.models import Delivery, Proposal
from tests.fakes.clock import ManualClock
from tests.support.app import add_user
from tests.support.gps import stay_at
from tests.support.jobs import jobs_app

HOME = (52.5200, 13.4050)
GYM = (52.5150, 13.3800)
CAFE = (52.5300, 13.3850)


def between(where: tuple[float, float], a: datetime, b: datetime, seed: int) -> list[Fix]:
    """Fixes at ``where`` from local ``a`` to local ``b`` (real minutes)."""
    minutes = int((b.astimezone(UTC) - a.astimezone(UTC)).total_seconds() // 60)
    return stay_at(where, a, minutes, seed)


@pytest.mark.parametrize(
    ("zone", "sunday"),
    [("America/New_York", date(2026, 3, 8)), ("Europe/Berlin", date(2026, 3, 29))],
    ids=["new-york", "berlin"],
)
async def test_scans_stay_at_local_2130_across_the_clock_change(
    tmp_path: Path, zone: str, sunday: date
) -> None:
    tz = ZoneInfo(zone)

    def local(day: int, hh: int, mm: int = 0) -> datetime:
        """Local wall-clock time ``day`` days after the Saturday before the change."""
        d = sunday + timedelta(days=day - 1)
        return datetime(d.year, d.month, d.day, hh, mm, tzinfo=tz)

    clock = ManualClock(local(0, 6).astimezone(UTC))
    async with jobs_app(tmp_path, clock) as app:
        ana = await add_user(app, "ana", timezone=zone)
        assert ana.id is not None
        await app.location.set_enabled(ana.id, True)
        await app.location.ingest(ana.id, [Fix(clock.now(), *HOME, 5)], "x")
        for name, where, kind in (("home", HOME, "home"), ("gym", GYM, "normal")):
            place = await app.location.add_place(ana.id, name, *where)
            place.kind = kind
            await app.location.save_place(place)
        cafe = await app.location.add_place(ana.id, "cafe", *CAFE)
        assert cafe.id is not None
        plan = [
            (HOME, local(0, 7), local(0, 11, 40)),
            (CAFE, local(0, 12), local(0, 13)),  # Saturday lunch
            (HOME, local(0, 13, 30), local(0, 18, 30)),
            (GYM, local(0, 19), local(1, 4)),  # through the night of the change: 3 h by 22:00
            (HOME, local(1, 4, 30), local(1, 16, 30)),
            (GYM, local(1, 17), local(1, 18)),  # Sunday, after the change
            (HOME, local(1, 18, 30), local(2, 7)),
        ]
        fixes = [f for n, (w, a, b) in enumerate(plan) for f in between(w, a, b, n)]
        clock.set(local(2, 7).astimezone(UTC))
        await app.location.ingest(ana.id, fixes, "owntracks")  # late points are fine
        # The job runs every five minutes; each evening from 20:00 to midnight local is enough
        # to see when it fires.
        for day in (0, 1):
            t = local(day, 20).astimezone(UTC)
            while t < local(day + 1, 0).astimezone(UTC):
                await app.location_proposals.scan(clock.set(t))
                t += timedelta(minutes=5)

        async with app.db.session() as s:
            got = list((await s.exec(select(Proposal).order_by(col(Proposal.start_at)))).all())
            pushes = list((await s.exec(select(Delivery).where(Delivery.kind == "proposal"))).all())
        assert [p.title for p in got] == [
            "Time at cafe, 12:00\u201313:00",
            "Time at gym, 19:00\u201322:00",
            "Time at gym, 17:00\u201318:00",
        ]
        # Saturday's scan at 21:30 local; Sunday's at 21:30 local too, an hour earlier in UTC.
        made = [p.created_at.astimezone(tz) for p in got]
        assert [(m.day, m.hour, m.minute) for m in made] == [
            (local(0, 0).day, 21, 30),
            (local(1, 0).day, 21, 30),
            (local(1, 0).day, 21, 30),
        ]
        before, after = made[0].utcoffset(), made[1].utcoffset()
        assert before is not None and after is not None
        assert after - before == timedelta(hours=1)
        assert got[1].end_at - got[1].start_at == timedelta(hours=3)
        assert len(pushes) == 2  # one a day
