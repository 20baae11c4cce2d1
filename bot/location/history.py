"""Location history files -> fixes (pure; no I/O beyond reading the file given).

* GPX (``.gpx``): every ``trkpt``, ``rtept`` and ``wpt`` with a ``<time>``; GPX carries no
  accuracy in metres, so these fixes have none.
* OwnTracks Recorder's ``.rec`` files: one line per message, ``ISO time``, a tab, the topic
  (or ``*``), a tab, the JSON the app published; ``_type: "location"`` lines are fixes. A
  JSON array of such messages (``ocat``'s output) is read too.
* Google Timeline: ``Records.json`` of a Takeout (``locations`` with ``latitudeE7``,
  ``longitudeE7``, ``accuracy``, ``timestamp``), and the phone's newer export
  (``rawSignals`` positions and ``semanticSegments`` paths, ``"48.1°, 11.5°"`` strings).

A line or record that cannot be read is reported by its line or position and skipped; the
rest are kept. Fixes are checked like live ones (coordinates, no time before 2000 or more
than a day ahead).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.location.geo import Fix
from bot.location.wire import BadPayload, checked, owntracks, parse_timestamp
from bot.shapes import items


class HistoryFileError(Exception):
    """The file cannot be read at all (the message says why, in plain words)."""


@dataclass(slots=True)
class History:
    """What a history file held."""

    kind: str
    """``gpx``, ``owntracks`` or ``google``."""
    fixes: list[Fix] = field(default_factory=list)
    bad: list[tuple[str, str]] = field(default_factory=list)
    """(where: ``line 12`` / ``record 3``, why) for everything skipped."""


def read_history(path: Path, now: datetime) -> History:
    """The fixes of a GPX, OwnTracks Recorder or Google Timeline file."""
    if not path.is_file():
        raise HistoryFileError(f"no file at {path}")
    with path.open("rb") as f:
        head = f.read(512).lstrip()
    if path.suffix.lower() == ".gpx" or head.startswith(b"<"):
        return _gpx(path, now)
    if head.startswith((b"{", b"[")):
        return _json_history(path, now)
    return _rec(path, now)


def _gpx(path: Path, now: datetime) -> History:
    out = History("gpx")
    n = 0
    try:
        # The operator's own file, streamed (a long track is large). ElementTree never fetches
        # external entities and the expat it ships (2.4.1+) refuses entity-expansion bombs.
        for _, elem in ET.iterparse(path, events=("end",)):  # noqa: S314
            if elem.tag.rsplit("}", 1)[-1] not in ("trkpt", "rtept", "wpt"):
                continue
            n += 1
            try:
                out.fixes.append(_gpx_point(elem, now))
            except (BadPayload, ValueError) as exc:
                out.bad.append((f"point {n}", str(exc) or "bad coordinates"))
            elem.clear()
    except ET.ParseError as exc:
        raise HistoryFileError(f"{path.name} is not valid GPX: {exc}") from None
    return out


def _gpx_point(elem: ET.Element, now: datetime) -> Fix:
    stamp = next((c.text for c in elem if c.tag.rsplit("}", 1)[-1] == "time"), None)
    if not (stamp or "").strip():
        raise BadPayload("no <time>")
    ts = parse_timestamp((stamp or "").strip().replace(" ", "T"))
    return checked(ts, float(elem.get("lat", "x")), float(elem.get("lon", "x")), None, now)


def _rec(path: Path, now: datetime) -> History:
    out = History("owntracks")
    lines = 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            lines += 1
            parts = line.rstrip("\n").split("\t", 2)
            if len(parts) != 3:
                out.bad.append((f"line {number}", "not TIME<tab>TOPIC<tab>JSON"))
                continue
            try:
                out.fixes += owntracks(parts[2].encode(), now)
            except BadPayload as exc:
                out.bad.append((f"line {number}", str(exc)))
    if lines and len(out.bad) == lines:
        raise HistoryFileError(
            f"{path.name} is neither GPX, an OwnTracks Recorder .rec file nor a Google "
            "Timeline export"
        )
    return out


def _json_history(path: Path, now: datetime) -> History:
    try:
        data = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HistoryFileError(f"{path.name} is not valid JSON: {exc}") from None
    if isinstance(data, list):  # ocat's JSON: the published messages
        out = History("owntracks")
        for n, item in enumerate(data, 1):
            try:
                out.fixes += owntracks(json.dumps(item).encode(), now)
            except BadPayload as exc:
                out.bad.append((f"record {n}", str(exc)))
        return out
    if not isinstance(data, dict):
        raise HistoryFileError(f"{path.name}: expected a JSON object or array")
    out = History("google")
    for n, item in enumerate(items(data.get("locations")), 1):
        _keep(out, f"locations[{n}]", lambda item=item: _records_json(item, now))
    for n, item in enumerate(items(data.get("rawSignals")), 1):
        position = item.get("position") if isinstance(item, dict) else None
        if position is not None:
            _keep(out, f"rawSignals[{n}]", lambda p=position: _raw_signal(p, now))
    for n, segment in enumerate(items(data.get("semanticSegments")), 1):
        path_points = segment.get("timelinePath") if isinstance(segment, dict) else None
        for m, point in enumerate(items(path_points), 1):
            _keep(out, f"semanticSegments[{n}][{m}]", lambda p=point: _path_point(p, now))
    if not out.fixes and not out.bad:
        raise HistoryFileError(
            f"{path.name} holds no locations (expected Google Timeline's Records.json or the "
            "phone's Timeline export)"
        )
    return out


def _keep(out: History, where: str, read: Any) -> None:
    try:
        out.fixes.append(read())
    except (BadPayload, KeyError, TypeError, ValueError) as exc:
        out.bad.append((where, str(exc) or type(exc).__name__))


def _records_json(item: dict[str, Any], now: datetime) -> Fix:
    if "timestamp" in item:
        ts = parse_timestamp(item["timestamp"])
    else:
        ts = datetime.fromtimestamp(int(item["timestampMs"]) / 1000, UTC)
    acc = item.get("accuracy")
    return checked(
        ts,
        int(item["latitudeE7"]) / 1e7,
        int(item["longitudeE7"]) / 1e7,
        float(acc) if acc is not None else None,
        now,
    )


_DEGREES = re.compile(r"^\s*(-?\d+(?:\.\d+)?)°?\s*,\s*(-?\d+(?:\.\d+)?)°?\s*$")


def _lat_lon(text: str) -> tuple[float, float]:
    match = _DEGREES.match(text)
    if match is None:
        raise ValueError(f"{text[:40]!r} is not 'LAT°, LON°'")
    return float(match.group(1)), float(match.group(2))


def _raw_signal(position: dict[str, Any], now: datetime) -> Fix:
    lat, lon = _lat_lon(position["LatLng"])
    acc = position.get("accuracyMeters")
    return checked(
        parse_timestamp(position["timestamp"]), lat, lon, float(acc) if acc else None, now
    )


def _path_point(point: dict[str, Any], now: datetime) -> Fix:
    lat, lon = _lat_lon(point["point"])
    return checked(parse_timestamp(point["time"]), lat, lon, None, now)
