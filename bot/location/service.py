"""Location in, stays out: the one place points are stored and stays re-detected.

Every entry point (Telegram, OwnTracks, Overland) ends in ``LocationService.ingest``; it stores
nothing unless the user turned location on, and nothing timed before they did. Coordinates are
logged only at DEBUG.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.clock import Clock
from bot.location.areas import AreaNames
from bot.location.geo import Fix
from bot.location.places import KINDS, NamedPlace, match_place, norm, parse_aliases
from bot.location.proposing import scan_time, stay_title
from bot.location.stays import DetectedStay, StayParams, detect_runs, merge
from storage.db import Database
from storage.models import Place, Proposal, Stay
from storage.repos.calendar import CalendarRepo, title_key
from storage.repos.location import LocationRepo
from storage.repos.outbox import OutboxRepo, Push

log = logging.getLogger(__name__)

SKEW = timedelta(minutes=1)
"""Points up to this long before /location on still count (clock skew, whole seconds)."""
TOKEN_PREFIX = "lbl_"  # noqa: S105  # a prefix, not a secret
IMPORT_BATCH = 5000
"""Points stored per transaction when a history file is imported."""


ENCRYPTED_NOTICE = (
    "Your OwnTracks app is sending your locations encrypted, and I cannot read them, so I am "
    "not keeping them. To fix it, open OwnTracks' settings (Android: Preferences > "
    "Connection), clear the Encryption key and leave it empty: the points it sends from then "
    "on are kept. The ones it sent encrypted are lost: the app counts them as delivered."
)
"""What the person is told, once per location token, when OwnTracks posts encrypted data."""


class LocationOff(Exception):
    """The user has not turned location on (or turned it off)."""


class NamingError(Exception):
    """A place could not be named from a proposal; the message is for the user."""


PLACE_NAME_RULE = "A place name is 1 to 60 characters."
"""The words for a name that is blank or too long (a 422 in the API; a taken name is a 409)."""


@dataclass(frozen=True, slots=True)
class NamedFromStay:
    """The outcome of answering "What was this place?"."""

    place: Place
    """The new place, centred on the stay."""
    renamed: list[Proposal]
    """Pending proposals from stays there, now titled after it."""
    next_unknown: Proposal | None
    """The next pending proposal at a place still without a name (to ask about next)."""


def token_digest(secret: str) -> str:
    """SHA-256 hex of a location token (tokens are 192-bit random: a fast hash suffices)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def named(place: Place) -> NamedPlace:
    """A stored place as the pure matcher sees it."""
    assert place.id is not None
    return NamedPlace(
        place.id,
        place.name,
        place.lat,
        place.lon,
        place.radius_m,
        parse_aliases(place.aliases),
        place.kind,
    )


@dataclass(frozen=True, slots=True)
class StayView:
    """A stay with its place's name (None: an unknown place)."""

    stay: Stay
    """The stored stay."""
    place: Place | None
    """The named place it matched."""
    area: str | None = None
    """For an unnamed place: the nearest town (offline lookup), when known."""


class LocationService:
    """Stores points, keeps stays up to date, answers questions about them."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        params: StayParams | None = None,
        retention: timedelta = timedelta(days=90),
        areas: AreaNames | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.params = params or StayParams()
        self.retention = retention
        self.areas = areas
        """Names unnamed places after the nearest town (None: they stay unnamed)."""
        """Raw points older than this are deleted (stays are kept)."""
        self._pruned_at: datetime | None = None
        self._refresh_locks: dict[int, asyncio.Lock] = {}
        """One refresh per user at a time: two interleaved would store a stale detection."""

    # --- the switch and the token ---

    async def set_enabled(self, user_id: int, on: bool) -> None:
        """Turn recording on or off (off takes effect for the very next point)."""
        async with self.db.session() as s:
            await LocationRepo(s).set_enabled(user_id, on, self.clock.now())

    async def enabled(self, user_id: int) -> bool:
        """Whether the user records location."""
        async with self.db.session() as s:
            return await LocationRepo(s).enabled(user_id)

    async def set_scan_time(self, user_id: int, at: time | None) -> None:
        """When the evening scan for proposals runs, local time (None: back to 21:30)."""
        text = f"{at.hour:02d}:{at.minute:02d}" if at is not None else None
        async with self.db.session() as s:
            await LocationRepo(s).set_scan_at(user_id, text, self.clock.now())

    async def scan_time(self, user_id: int) -> time:
        """The local time of the user's evening scan."""
        async with self.db.session() as s:
            row = await LocationRepo(s).setting(user_id)
        return scan_time(row.scan_at if row is not None else None)

    async def new_token(self, user_id: int) -> str:
        """A fresh phone-app token for the user; the previous one stops working."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(24)
        async with self.db.session() as s:
            await LocationRepo(s).set_token(user_id, token_digest(secret), self.clock.now())
        return secret

    async def revoke_token(self, user_id: int) -> None:
        """The phone apps' token stops working."""
        async with self.db.session() as s:
            await LocationRepo(s).set_token(user_id, None, self.clock.now())

    async def user_for_token(self, secret: str) -> int | None:
        """Whose token this is (None for unknown or revoked tokens)."""
        if not secret.startswith(TOKEN_PREFIX):
            return None
        async with self.db.session() as s:
            row = await LocationRepo(s).user_for_token(token_digest(secret))
        return row.user_id if row is not None else None

    async def tell_encrypted(self, user_id: int) -> bool:
        """Queue the one message about an OwnTracks app that encrypts; True when it is new.

        Once per location token (a new token after fixing the app starts afresh), through the
        outbox like any push: the person's preferred channel, held through quiet hours, sent
        once however many posts arrive and whichever process takes them.
        """
        now = self.clock.now()
        async with self.db.session() as s:
            setting = await LocationRepo(s).setting(user_id)
            token = (setting.token_hash or "")[:16] if setting is not None else ""
            push = Push(
                user_id, "notice", f"location-encrypted:{user_id}:{token}", now, ENCRYPTED_NOTICE
            )
            return await OutboxRepo(s).enqueue([push], now) > 0

    # --- points in ---

    async def ingest(self, user_id: int, fixes: Sequence[Fix], source: str) -> int:
        """Store fixes (repeats ignored) and re-detect stays around them; how many were new.

        Raises LocationOff when the user has not turned location on.
        """
        async with self.db.session() as s:
            repo = LocationRepo(s)
            setting = await repo.setting(user_id)
            if setting is None or not setting.enabled:
                raise LocationOff
            # Chat messages carry whole seconds and phone clocks drift: allow a little skew.
            since = setting.enabled_at - SKEW if setting.enabled_at is not None else None
            keep = [f for f in fixes if since is None or f.ts >= since]
            new = await repo.add_points(
                user_id, [(f.ts, f.lat, f.lon, f.accuracy_m) for f in keep], source
            )
        log.info("stored %d new location point(s) for user %s from %s", new, user_id, source)
        if keep:
            await self.refresh_stays(user_id, min(f.ts for f in keep), max(f.ts for f in keep))
        await self._prune_hourly()
        return new

    async def import_history(self, user_id: int, fixes: Sequence[Fix], source: str) -> int:
        """Store past fixes (a history file) and detect stays over them; how many were new.

        Unlike live points, fixes from before ``/location on`` are kept: importing history is
        a deliberate act. Raises LocationOff when location is off for the user.
        """
        if not await self.enabled(user_id):
            raise LocationOff
        new = 0
        ordered = sorted(fixes, key=lambda f: f.ts)
        for i in range(0, len(ordered), IMPORT_BATCH):  # bounded transactions
            batch = ordered[i : i + IMPORT_BATCH]
            async with self.db.session() as s:
                new += await LocationRepo(s).add_points(
                    user_id, [(f.ts, f.lat, f.lon, f.accuracy_m) for f in batch], source
                )
        if ordered:
            # One refresh over the whole span: the same stays as if the points came live.
            await self.refresh_stays(user_id, ordered[0].ts, ordered[-1].ts)
        log.info("imported %d new location point(s) for user %s from %s", new, user_id, source)
        return new

    async def _prune_hourly(self) -> None:
        # Retention rides on ingest (at most hourly per process): no points, nothing to prune.
        now = self.clock.now()
        if self._pruned_at is not None and now - self._pruned_at < timedelta(hours=1):
            return
        self._pruned_at = now
        gone = await self.prune(self.retention)
        if gone:
            log.info("deleted %d location point(s) past the %s retention", gone, self.retention)

    async def refresh_stays(self, user_id: int, start: datetime, end: datetime) -> None:
        """Re-detect the user's stays after new points in [start, end], exactly.

        Whatever order points arrive in, the stored stays are what one detection over all
        points finds (a property test holds it to that). Detection is greedy from the oldest
        fix; a run's decisions depend on no fix later than its last fix + ``max_gap``, and a
        run that is not a stay lasts under ``min_duration``. So everything before a stored
        stay starting at least ``min_duration + max_gap`` before the new points is as it was,
        and detection starts again at that stay (the stay before it seeds the merging, which
        the first new stay may join). It runs forward to the first silence longer than
        ``max_gap`` after the new points, past which nothing depends on them. A live share
        re-reads the last few hours; a late batch from the middle of a week re-reads the rest
        of its run of tracking. (Re-detecting only a window around each batch lost a stored
        stay reaching outside the window when points came out of order.)
        """
        p = self.params
        lock = self._refresh_locks.setdefault(user_id, asyncio.Lock())
        async with lock, self.db.session() as s:
            repo = LocationRepo(s)
            anchor = await repo.stay_starting_before(user_id, start - p.min_duration - p.max_gap)
            seed = None
            if anchor is not None:
                before = await repo.stay_starting_before(
                    user_id, anchor.start - timedelta(microseconds=1)
                )
                seed = _detected(before) if before is not None else None
                head = await repo.points_between(user_id, anchor.start, start)
            else:  # early history: from the silence before the new points
                head = await repo.run_before(user_id, start, p.max_gap)
                head += await repo.points_between(user_id, start, start)
            middle = await repo.points_between(user_id, start, end)
            tail = await repo.run_after(user_id, end, p.max_gap)
            points = {pt[0]: pt for pt in [*head, *middle, *tail]}
            if not points:
                return
            fixes = [Fix(*pt) for pt in points.values()]
            # Detection is CPU work (a long run of tracking is thousands of fixes): off the loop.
            runs = await asyncio.to_thread(detect_runs, fixes, p)
            found = merge(runs, p, seed)
            places = [named(pl) for pl in await repo.places(user_id)]
            rows = []
            for d in found:
                place = match_place(d.lat, d.lon, places)
                rows.append((d.start, d.end, d.lat, d.lon, place.id if place else None, d.points))
            lo = seed.start if seed is not None else min(points)
            hi = max(points) + timedelta(microseconds=1)
            await repo.replace_stays(user_id, lo, hi, rows)

    async def prune(self, retention: timedelta) -> int:
        """Delete raw points older than the retention (stays are kept)."""
        async with self.db.session() as s:
            return await LocationRepo(s).prune_points(self.clock.now() - retention)

    async def forget(
        self, user_id: int, start: datetime | None = None, end: datetime | None = None
    ) -> tuple[int, int]:
        """Delete the user's points and stays in a range (or all); (points, stays) deleted."""
        async with self.db.session() as s:
            return await LocationRepo(s).forget(user_id, start, end)

    # --- reading ---

    async def stays(self, user_id: int, start: datetime, end: datetime) -> list[StayView]:
        """The user's stays overlapping [start, end) with their places."""
        async with self.db.session() as s:
            repo = LocationRepo(s)
            places = {p.id: p for p in await repo.places(user_id)}
            rows = await repo.stays_between(user_id, start, end)
        return [await self._view(st, places.get(st.place_id)) for st in rows]

    async def _view(self, stay: Stay, place: Place | None) -> StayView:
        area = None
        if place is None and self.areas is not None:
            area = await self.areas.near(stay.lat, stay.lon)
        return StayView(stay, place, area)

    async def last_point(self, user_id: int) -> Fix | None:
        """The user's newest stored position."""
        async with self.db.session() as s:
            p = await LocationRepo(s).last_point(user_id)
        return Fix(p.ts, p.lat, p.lon, p.accuracy_m) if p is not None else None

    async def places(self, user_id: int) -> list[Place]:
        """The user's places, by name."""
        async with self.db.session() as s:
            return await LocationRepo(s).places(user_id)

    async def rematch(self, user_id: int) -> None:
        """Name every stay of the user again after a place changed."""
        async with self.db.session() as s:
            repo = LocationRepo(s)
            places = [named(p) for p in await repo.places(user_id)]
            far = datetime.max.replace(tzinfo=self.clock.now().tzinfo)
            near = datetime.min.replace(tzinfo=self.clock.now().tzinfo)
            for stay in await repo.stays_between(user_id, near, far):
                place = match_place(stay.lat, stay.lon, places)
                stay.place_id = place.id if place else None
                s.add(stay)

    async def add_place(self, user_id: int, name: str, lat: float, lon: float) -> Place:
        """A new named place centred on (lat, lon); stays there are named from now on."""
        async with self.db.session() as s:
            place = await LocationRepo(s).save_place(
                Place(user_id=user_id, name=name, lat=lat, lon=lon, created_at=self.clock.now())
            )
        await self.rematch(user_id)
        return place

    async def save_place(self, place: Place) -> Place:
        """Store a changed place (name, kind, aliases) and re-name stays."""
        async with self.db.session() as s:
            saved = await LocationRepo(s).save_place(place)
        await self.rematch(place.user_id)
        return saved

    async def change_place(
        self, user_id: int, place_id: int, *, name: str | None = None, kind: str | None = None
    ) -> Place | None:
        """Rename a place and/or mark it (``normal``, ``home``, ``ignored``).

        None when the place is not the user's; NamingError (plain words) for a bad name or kind,
        or for a name another rename took meanwhile (the unique name decides).
        """
        async with self.db.session() as s:
            repo = LocationRepo(s)
            place = await repo.place(user_id, place_id)
            if place is None:
                return None
            if name is not None:
                name = " ".join(name.split())
                if not name or len(name) > 60:
                    raise NamingError(PLACE_NAME_RULE)
                for other in await repo.places(user_id):
                    if other.id != place_id and norm(other.name) == norm(name):
                        raise NamingError(f"You already have a place called {other.name}.")
                place.name = name
            if kind is not None:
                if kind not in KINDS:
                    raise NamingError(f"A place is one of: {', '.join(KINDS)}.")
                place.kind = kind
            if not await repo.save_place_unless_taken(place):  # renamed another meanwhile
                raise NamingError(f"You already have a place called {name}.")
            saved = place
        await self.rematch(user_id)
        return saved

    async def delete_place(self, user_id: int, place_id: int) -> bool:
        """Delete one of the user's places."""
        async with self.db.session() as s:
            return await LocationRepo(s).delete_place(user_id, place_id)

    async def stays_at(
        self, user_id: int, place_id: int, *, before: datetime, limit: int = 5
    ) -> list[StayView]:
        """The user's latest stays at a place that began before ``before``, newest first."""
        async with self.db.session() as s:
            repo = LocationRepo(s)
            place = await repo.place(user_id, place_id)
            rows = await repo.last_stays_at(user_id, place_id, before, limit)
        return [StayView(st, place) for st in rows]

    # --- "What was this place?" ---

    async def name_from_proposal(
        self, user_id: int, proposal_id: int, name: str, tz: ZoneInfo
    ) -> NamedFromStay:
        """Create the place ``name`` at the centre of the stay behind a location proposal.

        Later stays there are named by it, and pending proposals from stays there take its
        name. Raises NamingError (plain words) when that cannot be done.
        """
        name = " ".join(name.split())
        if not name or len(name) > 60:
            raise NamingError("A place name is 1 to 60 characters.")
        async with self.db.session() as s:
            p = await CalendarRepo(s).proposal(user_id, proposal_id)
            if p is None or p.source != "location":
                raise NamingError(f"I have no proposal #{proposal_id} from your location.")
            if p.place is not None:
                raise NamingError(
                    f"That was {p.place}. To change the title: /proposal rename {proposal_id} "
                    "NEW TITLE; to rename the place: /place rename OLD -> NEW."
                )
            repo = LocationRepo(s)
            if any(norm(x.name) == norm(name) for x in await repo.places(user_id)):
                raise NamingError(f"You already have a place called {name}: pick another name.")
            stay = _unnamed_stay(await repo.stays_between(user_id, p.start_at, p.end_at), p)
            if stay is None:
                raise NamingError("I no longer have that stay (its history may be forgotten).")
            lat, lon = stay.lat, stay.lon
        place = await self.add_place(user_id, name, lat, lon)
        return await self._retitle_after(user_id, place, tz)

    async def _retitle_after(self, user_id: int, place: Place, tz: ZoneInfo) -> NamedFromStay:
        now = self.clock.now()
        renamed: list[Proposal] = []
        next_unknown = None
        async with self.db.session() as s:
            repo = LocationRepo(s)
            for p in await CalendarRepo(s).pending_proposals(user_id, now):
                if p.source != "location" or p.place is not None:
                    continue
                stays = await repo.stays_between(user_id, p.start_at, p.end_at)
                if any(st.place_id == place.id for st in stays):
                    p.place = place.name
                    p.title = stay_title(place.name, p.start_at, p.end_at, tz)
                    p.title_key = title_key(p.title)
                    s.add(p)
                    renamed.append(p)
                elif next_unknown is None:
                    next_unknown = p
        return NamedFromStay(place, renamed, next_unknown)


def _detected(stay: Stay) -> DetectedStay:
    """A stored stay as the detector made it."""
    return DetectedStay(stay.start, stay.end, stay.lat, stay.lon, stay.points)


def _unnamed_stay(stays: Sequence[Stay], p: Proposal) -> Stay | None:
    """The stay at an unnamed place that overlaps the proposal most."""

    def overlap(st: Stay) -> timedelta:
        return min(st.end, p.end_at) - max(st.start, p.start_at)

    candidates = [st for st in stays if st.place_id is None and overlap(st) > timedelta(0)]
    return max(candidates, key=overlap, default=None)
