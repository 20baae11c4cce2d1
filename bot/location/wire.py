"""The phone apps' wire formats -> fixes (pure; no I/O, no clock of its own).

OwnTracks HTTP mode posts one JSON object per request; only ``_type: "location"`` carries a
position, every other type (``transition``, ``waypoint``, ``waypoints``, ``status``, ``lwt``,
...) and zero-length bodies are accepted and ignored. Overland posts
``{"locations": [GeoJSON Point features]}`` with longitude first and an ISO 8601
``properties.timestamp``; its ``current`` and ``trip`` members are not history.

Neither app can drop a point the server refuses: OwnTracks keeps a message at the head of its
queue until it gets a 2xx (Android re-queues it and retries a location for about a week,
iOS for good), and Overland re-sends a batch until the server answers ``{"result": "ok"}``
(its README, "Response"). Refusing a point that can never be stored would jam every later
point behind it on the phone. So an OwnTracks location that cannot be stored raises
``Unusable`` (the route acknowledges it and logs why), and an Overland batch is not refused for
one bad point. Its good points are kept and the bad ones skipped, each with
the reason in plain words; only a body that is not a batch at all (not JSON, no ``locations``
list, too many points) is refused whole.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.location.geo import Fix, valid_coordinates

MAX_POINTS = 1000
"""Most points accepted in one request (Overland's largest batch setting)."""
MAX_AHEAD = timedelta(minutes=5)
"""A fix stamped further ahead of the server's clock than this is a wrong clock, not a
position: kept, it would be "where you are" until that hour came and cut the stays around it.
Five minutes leaves room for the skew between a phone's clock and the server's."""
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
"""Fixes before this are a broken clock too."""


class BadPayload(ValueError):
    """The request cannot be stored; the message says why in plain words."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status to answer with."""


class Unusable(BadPayload):
    """An OwnTracks location that can never be stored: acknowledged, not refused.

    A missing or impossible field, or a time far ahead of lifebot's clock: refused, it would
    stay at the head of the phone's queue, ahead of every later point.
    """


class Encrypted(BadPayload):
    """An OwnTracks message sealed with the app's encryption key: lifebot cannot read it.

    The HTTP route acknowledges it (a refusal would only keep it at the head of the phone's
    queue, ahead of every later point) and tells the person; an imported file reports the line.
    """


def _number(value: Any, what: str) -> float:
    # Old OwnTracks versions sent numbers as strings; accept both, refuse anything else.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadPayload(f"{what} must be a number")
    try:
        out = float(value)
    except ValueError:
        raise BadPayload(f"{what} must be a number") from None
    if not math.isfinite(out):
        raise BadPayload(f"{what} must be a finite number")
    return out


def checked(ts: datetime, lat: float, lon: float, acc: float | None, now: datetime) -> Fix:
    """A fix after checking its coordinates and time; BadPayload otherwise."""
    if not valid_coordinates(lat, lon):
        raise BadPayload("latitude must be within -90..90 and longitude within -180..180")
    if ts > now + MAX_AHEAD:
        raise BadPayload(
            f"the time is more than {MAX_AHEAD.seconds // 60} minutes ahead of lifebot's clock "
            "(check the phone's clock)"
        )
    if ts < EARLIEST:
        raise BadPayload("the timestamp is before the year 2000 (check the phone's clock)")
    if acc is not None and acc < 0:
        acc = None  # iOS reports -1 for "unknown"
    return Fix(ts, lat, lon, acc)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadPayload("the body is not valid JSON") from None
    except RecursionError:  # the parser recurses: 100,000 "[" would end the request in a 500
        raise BadPayload("the body's JSON is nested too deeply") from None


def owntracks(body: bytes, now: datetime) -> list[Fix]:
    """The fixes in an OwnTracks HTTP post (none for other message types or an empty body).

    Unusable for a location that can never be stored; BadPayload when the body is not one
    JSON object (nothing OwnTracks sends).
    """
    if not body.strip():
        return []
    data = _json(body)
    if not isinstance(data, dict):
        raise BadPayload("expected one JSON object with a _type")
    kind = data.get("_type")
    if kind == "encrypted":
        raise Encrypted(
            "encrypted payloads are not supported: turn off the encryption key in OwnTracks",
            status=422,
        )
    if kind != "location":
        return []
    try:
        return [_location(data, now)]
    except BadPayload as exc:
        raise Unusable(str(exc)) from None


def _location(data: dict[str, Any], now: datetime) -> Fix:
    for key in ("lat", "lon", "tst"):
        if key not in data:
            raise BadPayload(f"a location needs {key!r}")
    tst = _number(data["tst"], "tst")
    if not 0 <= tst < 1e11:
        raise BadPayload("tst must be epoch seconds")
    acc = _number(data["acc"], "acc") if data.get("acc") is not None else None
    return checked(
        datetime.fromtimestamp(tst, UTC),
        _number(data["lat"], "lat"),
        _number(data["lon"], "lon"),
        acc,
        now,
    )


def parse_timestamp(value: Any) -> datetime:
    """ISO 8601 with ``Z`` or an offset (``-07:00`` or ``-0700``); a zone is required."""
    if not isinstance(value, str):
        raise BadPayload("properties.timestamp must be an ISO 8601 string")
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        # the value is not repeated: a refusal never echoes what was sent (README: Errors)
        raise BadPayload(
            "properties.timestamp is not ISO 8601 (e.g. 2026-03-01T12:00:00Z)"
        ) from None
    if ts.tzinfo is None:
        raise BadPayload("properties.timestamp needs a time zone (Z or an offset)")
    try:
        return ts.astimezone(UTC)
    except OverflowError:  # year 1 at +14:00 or 9999 at -14:00: no instant in UTC
        raise BadPayload("properties.timestamp is out of range (check the phone's clock)") from None


def _feature(item: Any, now: datetime) -> Fix | None:
    if not isinstance(item, dict):
        raise BadPayload("each location must be a GeoJSON Feature object")
    geometry = item.get("geometry")
    props = item.get("properties")
    if not isinstance(props, dict):
        raise BadPayload("a location needs properties with a timestamp")
    if not isinstance(geometry, dict) or geometry.get("type") != "Point":
        if geometry is None:
            return None  # tracking-stats records (visits, app events) carry no position
        raise BadPayload("a location's geometry must be a GeoJSON Point")
    coords = geometry.get("coordinates")
    if not isinstance(coords, list) or len(coords) < 2:
        raise BadPayload("a Point needs coordinates [longitude, latitude]")
    lon, lat = _number(coords[0], "longitude"), _number(coords[1], "latitude")
    acc_raw = props.get("horizontal_accuracy")
    acc = _number(acc_raw, "horizontal_accuracy") if acc_raw is not None else None
    return checked(parse_timestamp(props.get("timestamp")), lat, lon, acc, now)


@dataclass(slots=True)
class Batch:
    """What an Overland batch holds: the points to store and the reasons others were skipped."""

    fixes: list[Fix] = field(default_factory=list)
    """The good points, in the batch's order."""
    skipped: list[str] = field(default_factory=list)
    """One plain reason per skipped point, naming its index ("location 3: ..."); never the
    value that was sent."""


def overland(body: bytes, now: datetime) -> Batch:
    """The fixes in an Overland batch (``current`` and ``trip`` are not history).

    A bad point is skipped with its reason; BadPayload only when the body is not a batch.
    """
    data = _json(body)
    if not isinstance(data, dict) or not isinstance(data.get("locations"), list):
        raise BadPayload('expected {"locations": [...]}')
    items = data["locations"]
    if len(items) > MAX_POINTS:
        raise BadPayload(
            f"{len(items)} points in one request; send at most {MAX_POINTS} "
            "(set Points per Batch lower)",
            status=413,
        )
    out = Batch()
    for i, item in enumerate(items):
        try:
            fix = _feature(item, now)
        except BadPayload as exc:
            out.skipped.append(f"location {i}: {exc}")
            continue
        if fix is not None:
            out.fixes.append(fix)
    return out
