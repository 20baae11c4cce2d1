"""Points on the Earth and the distance between them (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

EARTH_RADIUS_M = 6_371_008.8
"""Mean Earth radius (IUGG), metres."""


@dataclass(frozen=True, slots=True)
class Fix:
    """One position fix: where a device was at a moment, and how sure it was."""

    ts: datetime
    """When (aware)."""
    lat: float
    """Latitude, degrees."""
    lon: float
    """Longitude, degrees."""
    accuracy_m: float | None = None
    """Horizontal accuracy radius in metres (None when unknown)."""


def distance_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres (haversine; ample for stays of ~100 m)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp = p2 - p1
    dl = math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))


def valid_coordinates(lat: float, lon: float) -> bool:
    """Latitude in [-90, 90] and longitude in [-180, 180], both finite."""
    return math.isfinite(lat) and math.isfinite(lon) and -90 <= lat <= 90 and -180 <= lon <= 180
