"""Stays never depend on the order points arrive in (#33).

Phones queue points and resend them late, in batches, out of order. Whatever the order and
the batch sizes, the stays stored after every point is in are exactly what one detection over
all the points finds. Before, one full-week run in three stored 32 of 34 stays: a batch out of
order re-detected a window around itself and deleted a stored stay reaching outside it whole.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import col, select

from bot.location.geo import Fix
from bot.location.service import LocationService
from bot.location.stays import detect_stays
from storage.db import Database
from storage.models import Stay
from storage.repos.location import LocationRepo
from storage.repos.users import UserRepo
from tests.fakes.clock import ManualClock
from tests.support.gps import WEEK, generate

FIXES, _ = generate(WEEK)
EXPECTED = [(d.start, d.end, d.lat, d.lon, d.points) for d in detect_stays(FIXES)]


async def _template(path: Path) -> None:
    """A migrated database with one user who turned location on before the week."""
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    async with db.session() as s:
        user = await UserRepo(s).create("ana")
        assert user.id == 1
        await LocationRepo(s).set_enabled(1, True, WEEK - timedelta(days=1))
    await db.engine.dispose()


def _orders(fixes: list[Fix], how: str, rng: random.Random) -> list[Fix]:
    if how == "in order":
        return list(fixes)
    if how == "reversed":
        return list(reversed(fixes))
    if how == "shuffled":
        return rng.sample(fixes, len(fixes))
    if how == "days shuffled":  # each day's queue sent whole, days in any order
        days: dict[object, list[Fix]] = {}
        for f in fixes:
            days.setdefault(f.ts.date(), []).append(f)
        return [f for day in rng.sample(list(days.values()), len(days)) for f in day]
    # "late": in order, but a random tenth held back and sent at the end (a phone's queue)
    held = set(rng.sample(range(len(fixes)), len(fixes) // 10))
    return [f for i, f in enumerate(fixes) if i not in held] + [fixes[i] for i in sorted(held)]


async def _feed(
    template: Path, order: list[Fix], sizes: list[int], work: Path
) -> list[tuple[object, ...]]:
    path = work / "stays.db"
    shutil.copy(template, path)
    db = Database(f"sqlite+aiosqlite:///{path}")
    service = LocationService(db, ManualClock(WEEK + timedelta(days=8)))
    i, n = 0, 0
    while i < len(order):
        size = sizes[n % len(sizes)]
        await service.ingest(1, order[i : i + size], "owntracks")
        i, n = i + size, n + 1
    async with db.session() as s:
        rows = (await s.exec(select(Stay).order_by(col(Stay.start)))).all()
    await db.engine.dispose()
    return [(r.start, r.end, r.lat, r.lon, r.points) for r in rows]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    how=st.sampled_from(["in order", "reversed", "shuffled", "days shuffled", "late"]),
    sizes=st.lists(st.integers(60, 900), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_order_and_batching_stores_exactly_one_detection_over_all_points(
    how: str, sizes: list[int], seed: int, tmp_path: Path
) -> None:
    template = tmp_path / "template.db"  # the same folder for every example of one run
    if not template.exists():
        asyncio.run(_template(template))
    rng = random.Random(seed)
    order = _orders(FIXES, how, rng)
    if how in ("shuffled", "reversed"):
        # Every batch of a scattered order spans the week: fewer, larger ones keep this quick.
        sizes = [max(s, 400) for s in sizes]
    with tempfile.TemporaryDirectory(dir=tmp_path) as work:
        stored = asyncio.run(_feed(template, order, sizes, Path(work)))
    assert len(EXPECTED) > 25
    assert stored == EXPECTED, f"{how}, batches {sizes}: {len(stored)} of {len(EXPECTED)}"


async def test_overlapping_batches_count_only_new_points_on_sqlite_and_postgresql(
    postgres_or_sqlite_url: str,
) -> None:
    # A phone that resends part of its queue: the repeats are not counted or stored twice,
    # on either database, and the stays are still exactly one detection over the week.
    db = Database(postgres_or_sqlite_url)
    await db.migrate()
    try:
        async with db.session() as s:
            user = await UserRepo(s).create("ana")
            assert user.id is not None
            await LocationRepo(s).set_enabled(user.id, True, WEEK - timedelta(days=1))
        service = LocationService(db, ManualClock(WEEK + timedelta(days=8)))
        half = len(FIXES) // 2
        first = await service.ingest(user.id, FIXES[: half + 300], "owntracks")
        second = await service.ingest(user.id, FIXES[half:], "owntracks")
        again = await service.ingest(user.id, FIXES[:50], "owntracks")
        async with db.session() as s:
            stored = await LocationRepo(s).count_points(user.id)
            rows = (await s.exec(select(Stay).order_by(col(Stay.start)))).all()
    finally:
        await db.engine.dispose()
    assert (first, second, again) == (half + 300, len(FIXES) - half - 300, 0)
    assert stored == len(FIXES)
    assert [(r.start, r.end, r.lat, r.lon, r.points) for r in rows] == EXPECTED
