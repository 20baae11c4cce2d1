"""Named places (pure): which place a stay was at, and which place a name means."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.location.geo import distance_m

KINDS = ("normal", "home", "ignored")
"""``home`` is home-like (never proposed as an event); ``ignored`` is never proposed either."""


@dataclass(frozen=True, slots=True)
class NamedPlace:
    """A place as the matcher sees it."""

    id: int
    """Row id."""
    name: str
    """What the person calls it."""
    lat: float
    """Centre latitude."""
    lon: float
    """Centre longitude."""
    radius_m: float
    """How far from the centre still counts."""
    aliases: tuple[str, ...] = ()
    """Other names."""
    kind: str = "normal"
    """``normal``, ``home`` or ``ignored``."""


def parse_aliases(text: str) -> tuple[str, ...]:
    """``"work, office"`` -> ``("work", "office")`` (blank parts dropped)."""
    return tuple(a.strip() for a in text.split(",") if a.strip())


def match_place(lat: float, lon: float, places: Sequence[NamedPlace]) -> NamedPlace | None:
    """The nearest place whose radius covers (lat, lon); None when none does."""
    best: tuple[float, NamedPlace] | None = None
    for p in places:
        d = distance_m(lat, lon, p.lat, p.lon)
        if d <= p.radius_m and (best is None or d < best[0]):
            best = (d, p)
    return best[1] if best else None


def norm(name: str) -> str:
    """Case- and space-insensitive form of a place name."""
    return " ".join(name.lower().split()).removeprefix("the ")


def find_by_name(name: str, places: Sequence[NamedPlace]) -> NamedPlace | None:
    """The place called ``name`` or having it as an alias (case-insensitive)."""
    want = norm(name)
    for p in places:
        if norm(p.name) == want or want in {norm(a) for a in p.aliases}:
            return p
    return None
