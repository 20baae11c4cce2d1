"""Location points, places, stays and the per-user switch; every query is scoped by user id."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import LocationPoint, LocationSetting, Place, Stay
from storage.repos._conn import connection_of
from storage.repos._upsert import add_unless_taken, insert_ignore

PointRow = tuple[datetime, float, float, float | None]
"""(time, latitude, longitude, accuracy in metres or None)."""
_POINT = (
    col(LocationPoint.ts),
    col(LocationPoint.lat),
    col(LocationPoint.lon),
    col(LocationPoint.accuracy_m),
)
"""The columns a point's detection reads: plain rows, not objects (a week is ~5,000 points)."""
StayRow = tuple[datetime, datetime, float, float, int | None, int]
"""(start, end, latitude, longitude, place id or None, number of points)."""


class LocationRepo:
    """Everything location, for one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    # --- the switch and the phone-app token ---

    async def setting(self, user_id: int) -> LocationSetting | None:
        """The user's location setting (None: never turned on)."""
        return await self.s.get(LocationSetting, user_id)

    async def enabled(self, user_id: int) -> bool:
        """Whether the user records location now."""
        row = await self.setting(user_id)
        return row is not None and row.enabled

    async def enabled_settings(self) -> list[LocationSetting]:
        """Every user's setting with location on."""
        res = await self.s.exec(select(LocationSetting).where(col(LocationSetting.enabled)))
        return list(res.all())

    async def set_enabled(self, user_id: int, on: bool, now: datetime) -> LocationSetting:
        """Turn recording on or off."""
        row = await self.setting(user_id) or LocationSetting(user_id=user_id)
        if on and not row.enabled:
            row.enabled_at = now
        row.enabled = on
        row.updated_at = now
        self.s.add(row)
        await self.s.flush()
        return row

    async def set_scan_at(self, user_id: int, at: str | None, now: datetime) -> None:
        """Set the local ``HH:MM`` of the user's evening scan (None: the default)."""
        row = await self.setting(user_id) or LocationSetting(user_id=user_id)
        row.scan_at = at
        row.updated_at = now
        self.s.add(row)
        await self.s.flush()

    async def set_token(self, user_id: int, token_hash: str | None, now: datetime) -> None:
        """Replace (or with None revoke) the user's phone-app token."""
        row = await self.setting(user_id) or LocationSetting(user_id=user_id)
        row.token_hash = token_hash
        row.updated_at = now
        self.s.add(row)
        await self.s.flush()

    async def user_for_token(self, token_hash: str) -> LocationSetting | None:
        """The setting holding this token hash, if any."""
        res = await self.s.exec(
            select(LocationSetting).where(LocationSetting.token_hash == token_hash)
        )
        return res.first()

    # --- points ---

    async def add_points(self, user_id: int, points: Sequence[PointRow], source: str) -> int:
        """Store points; repeats of (user, time) are ignored. How many were new."""
        if not points:
            return 0
        # One statement with its rows as parameters (SQLAlchemy's "insertmanyvalues"): it is
        # compiled once and cached. A ``.values(rows)`` statement was compiled afresh for
        # every batch, which took most of the time a phone's batch of points cost.
        stmt = insert_ignore(self.s, LocationPoint, ["user_id", "ts"]).returning(
            LocationPoint.__table__.c.id  # type: ignore[attr-defined]
        )
        rows = [
            {
                "user_id": user_id,
                "ts": ts,
                "lat": lat,
                "lon": lon,
                "accuracy_m": acc,
                "source": source,
            }
            for ts, lat, lon, acc in points
        ]
        conn = await connection_of(self.s)
        return len((await conn.execute(stmt, rows)).all())

    async def points_between(self, user_id: int, start: datetime, end: datetime) -> list[PointRow]:
        """The user's points with start <= ts <= end, oldest first."""
        res = await self.s.exec(
            select(*_POINT)
            .where(
                LocationPoint.user_id == user_id,
                col(LocationPoint.ts) >= start,
                col(LocationPoint.ts) <= end,
            )
            .order_by(col(LocationPoint.ts))
        )
        return [(ts, lat, lon, acc) for ts, lat, lon, acc in res.all()]

    async def run_before(self, user_id: int, edge: datetime, gap: timedelta) -> list[PointRow]:
        """The user's points before ``edge`` back to the first silence longer than ``gap``."""
        return list(reversed(await self._walk(user_id, edge, gap, back=True)))

    async def run_after(self, user_id: int, edge: datetime, gap: timedelta) -> list[PointRow]:
        """The user's points after ``edge`` up to the first silence longer than ``gap``."""
        return await self._walk(user_id, edge, gap, back=False)

    async def _walk(
        self, user_id: int, edge: datetime, gap: timedelta, *, back: bool, page: int = 2000
    ) -> list[PointRow]:
        """Points beyond ``edge`` (earlier when ``back``), nearest first, until a silence."""
        out: list[PointRow] = []
        last = edge
        while True:
            ts = col(LocationPoint.ts)
            query = select(*_POINT).where(
                LocationPoint.user_id == user_id, ts < last if back else ts > last
            )
            rows = list(
                (await self.s.exec(query.order_by(ts.desc() if back else ts).limit(page))).all()
            )
            for row_ts, lat, lon, acc in rows:
                if abs(row_ts - last) > gap:
                    return out
                out.append((row_ts, lat, lon, acc))
                last = row_ts
            if len(rows) < page:
                return out

    async def last_point(self, user_id: int) -> LocationPoint | None:
        """The user's newest point."""
        res = await self.s.exec(
            select(LocationPoint)
            .where(LocationPoint.user_id == user_id)
            .order_by(col(LocationPoint.ts).desc())
            .limit(1)
        )
        return res.first()

    async def count_points(self, user_id: int) -> int:
        """How many points the user has."""
        res = await self.s.exec(select(func.count()).where(LocationPoint.user_id == user_id))
        return int(res.one())

    async def prune_points(self, before: datetime) -> int:
        """Delete every user's points older than ``before`` (retention); stays are kept."""
        res = await self.s.exec(delete(LocationPoint).where(col(LocationPoint.ts) < before))
        return int(res.rowcount or 0)

    async def forget(
        self, user_id: int, start: datetime | None = None, end: datetime | None = None
    ) -> tuple[int, int]:
        """Delete the user's points and stays in [start, end) (everything without bounds)."""
        p = delete(LocationPoint).where(col(LocationPoint.user_id) == user_id)
        st = delete(Stay).where(col(Stay.user_id) == user_id)
        if start is not None:
            p = p.where(col(LocationPoint.ts) >= start)
            st = st.where(col(Stay.end) > start)
        if end is not None:
            p = p.where(col(LocationPoint.ts) < end)
            st = st.where(col(Stay.start) < end)
        points = await self.s.exec(p)
        stays = await self.s.exec(st)
        return int(points.rowcount or 0), int(stays.rowcount or 0)

    # --- places ---

    async def places(self, user_id: int) -> list[Place]:
        """The user's named places, by name."""
        res = await self.s.exec(
            select(Place).where(Place.user_id == user_id).order_by(col(Place.name))
        )
        return list(res.all())

    async def place(self, user_id: int, place_id: int) -> Place | None:
        """One of the user's places by id (None for another user's)."""
        row = await self.s.get(Place, place_id)
        return row if row is not None and row.user_id == user_id else None

    async def save_place(self, place: Place) -> Place:
        """Insert or update a place."""
        self.s.add(place)
        await self.s.flush()
        return place

    async def save_place_unless_taken(self, place: Place) -> bool:
        """Store a place; False (nothing stored) when another of its user's places has its name.

        That place was named by another transaction after this one checked: the unique name
        decides, and this one's change is rolled back to a savepoint.
        """
        return await add_unless_taken(self.s, place) is None

    async def delete_place(self, user_id: int, place_id: int) -> bool:
        """Delete a place; its stays become unknown places again."""
        row = await self.place(user_id, place_id)
        if row is None:
            return False
        res = await self.s.exec(
            select(Stay).where(Stay.user_id == user_id, Stay.place_id == place_id)
        )
        for stay in res.all():
            stay.place_id = None
            self.s.add(stay)
        await self.s.flush()
        await self.s.delete(row)
        await self.s.flush()
        return True

    # --- stays ---

    async def stays_between(self, user_id: int, start: datetime, end: datetime) -> list[Stay]:
        """The user's stays overlapping [start, end), oldest first."""
        res = await self.s.exec(
            select(Stay)
            .where(Stay.user_id == user_id, col(Stay.start) < end, col(Stay.end) > start)
            .order_by(col(Stay.start))
        )
        return list(res.all())

    async def stay_starting_before(self, user_id: int, before: datetime) -> Stay | None:
        """The user's latest stay that starts at or before ``before``."""
        res = await self.s.exec(
            select(Stay)
            .where(Stay.user_id == user_id, col(Stay.start) <= before)
            .order_by(col(Stay.start).desc())
            .limit(1)
        )
        return res.first()

    async def last_stays_at(
        self, user_id: int, place_id: int, before: datetime, limit: int = 5
    ) -> list[Stay]:
        """The user's latest stays at a place starting before ``before``, newest first."""
        res = await self.s.exec(
            select(Stay)
            .where(Stay.user_id == user_id, Stay.place_id == place_id, col(Stay.start) < before)
            .order_by(col(Stay.start).desc())
            .limit(limit)
        )
        return list(res.all())

    async def replace_stays(
        self, user_id: int, start: datetime, end: datetime, rows: Sequence[StayRow]
    ) -> list[Stay]:
        """Swap the user's stays overlapping [start, end) for ``rows`` (re-detection)."""
        await self.s.exec(
            delete(Stay).where(
                col(Stay.user_id) == user_id, col(Stay.start) < end, col(Stay.end) > start
            )
        )
        out = [
            Stay(user_id=user_id, start=a, end=b, lat=lat, lon=lon, place_id=pid, points=n)
            for a, b, lat, lon, pid, n in rows
        ]
        self.s.add_all(out)
        await self.s.flush()
        return out
