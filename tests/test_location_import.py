"""Location history import (#33): ``lifebot import location FILE --user U``.

A GPX week imported gives the same stays as the same week sent live; an OwnTracks Recorder
file goes through the command line with its bad lines reported by number; Google Timeline's
Records.json is read too; nothing is imported while location is off.
"""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app.build import App
from bot.location.geo import Fix
from bot.location.history import HistoryFileError, read_history
from storage.repos.location import LocationRepo
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user, make_settings
from tests.support.cli import run_cli
from tests.support.gps import WEEK, generate
from tests.support.web import client_for

WEEK_FIXES, _ = generate(WEEK)


def _gpx(fixes: list[Fix], path: Path) -> Path:
    points = "\n".join(
        f'      <trkpt lat="{f.lat!r}" lon="{f.lon!r}"><time>'
        f"{f.ts.astimezone(UTC).isoformat().replace('+00:00', 'Z')}</time></trkpt>"
        for f in fixes
    )
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1">\n'
        f"  <trk><name>week</name><trkseg>\n{points}\n  </trkseg></trk>\n</gpx>\n",
        encoding="utf-8",
    )
    return path


async def _stays(app: App, user_id: int) -> list[tuple[Any, ...]]:
    found = await app.location.stays(user_id, WEEK - timedelta(days=1), WEEK + timedelta(days=9))
    return [(v.stay.start, v.stay.end, v.stay.lat, v.stay.lon, v.stay.points) for v in found]


async def test_a_gpx_week_imported_gives_the_stays_of_the_same_week_sent_live(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    clock = ManualClock(WEEK - timedelta(days=1))
    app = await app_factory(fake_llm, clock=clock, web_enabled=True)
    live, past = await add_user(app, "live"), await add_user(app, "past")
    assert live.id is not None and past.id is not None
    for user in (live, past):
        assert user.id is not None
        await app.location.set_enabled(user.id, True)
    token = await app.location.new_token(live.id)
    clock.set(WEEK + timedelta(days=8))

    # Live: the Overland app's batches of 200 as the week goes by (GPX has no accuracy, so
    # neither do these).
    async with client_for(app) as client:
        for i in range(0, len(WEEK_FIXES), 200):
            batch = WEEK_FIXES[i : i + 200]
            body = {
                "locations": [
                    {
                        "type": "Feature",
                        "geometry": {"type": "Point", "coordinates": [f.lon, f.lat]},
                        "properties": {"timestamp": f.ts.isoformat()},
                    }
                    for f in batch
                ]
            }
            answer = await client.post(
                "/api/location/overland", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.json()["result"] == "ok" and answer.json()["skipped"] == 0

    history = read_history(_gpx(WEEK_FIXES, tmp_path / "week.gpx"), clock.now())
    assert history.kind == "gpx" and history.bad == []
    assert len(history.fixes) == len(WEEK_FIXES)
    assert await app.location.import_history(past.id, history.fixes, "gpx") == len(WEEK_FIXES)

    imported, sent = await _stays(app, past.id), await _stays(app, live.id)
    assert len(imported) > 25
    assert imported == sent


async def test_an_owntracks_recorder_file_imports_from_the_command_line(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm)
    ana = await add_user(app, "ana-chat", name="ana")
    assert ana.id is not None
    day = WEEK_FIXES[: len(WEEK_FIXES) // 7]
    lines = [
        f"{f.ts.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}\t*                 \t"
        + json.dumps(
            {
                "_type": "location",
                "tst": int(f.ts.timestamp()),
                "lat": f.lat,
                "lon": f.lon,
                "acc": f.accuracy_m,
                "tid": "p1",
            }
        )
        for f in day
    ]
    lines.insert(3, "2026-03-23T00:10:00Z\t*\t{broken")
    lines.insert(7, f"{day[7].ts:%Y-%m-%dT%H:%M:%SZ}\t*\t" + json.dumps({"_type": "lwt"}))
    rec = tmp_path / "2026-03.rec"
    rec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {"LIFEBOT_DATA_DIR": str(make_settings(tmp_path).data_dir)}

    code, out, err = await run_cli(
        "import", "location", str(rec), "--user", "ana", cwd=tmp_path, env=env
    )
    assert code == 1 and "Location history is off for ana" in err  # consent first
    async with app.db.session() as s:
        assert await LocationRepo(s).count_points(ana.id) == 0

    await app.location.set_enabled(ana.id, True)
    code, out, err = await run_cli(
        "import", "location", str(rec), "--user", "ana", cwd=tmp_path, env=env
    )
    assert code == 0, err
    assert "skipped 2026-03.rec line 4: the body is not valid JSON" in err
    assert f"Imported {len(day)} points" in out and "stays between" in out
    async with app.db.session() as s:
        assert await LocationRepo(s).count_points(ana.id) == len(day)
    stays = await _stays(app, ana.id)
    assert stays and stays[0][4] > 100  # the night at home, from the file

    code, out, _ = await run_cli(
        "import", "location", str(rec), "--user", "ana", cwd=tmp_path, env=env
    )
    assert code == 0 and f"Imported 0 points from 2026-03.rec (owntracks; {len(day)} already" in out


def test_google_timeline_records_are_read(tmp_path: Path) -> None:
    records = {
        "locations": [
            {"latitudeE7": 525200000, "longitudeE7": 134050000, "accuracy": 12,
             "timestamp": "2024-02-01T08:00:00.123Z"},
            {"latitudeE7": 525201000, "longitudeE7": 134051000, "timestampMs": "1706774700000"},
            {"latitudeE7": "north", "longitudeE7": 1, "timestamp": "2024-02-01T08:10:00Z"},
        ]
    }  # fmt: skip
    path = tmp_path / "Records.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    history = read_history(path, WEEK)
    assert history.kind == "google"
    assert [(f.lat, f.lon, f.accuracy_m) for f in history.fixes] == [
        (52.52, 13.405, 12.0),
        (52.5201, 13.4051, None),
    ]
    assert [where for where, _ in history.bad] == ["locations[3]"]


def test_a_timeline_whose_lists_are_not_lists_is_refused_in_words(tmp_path: Path) -> None:
    """ "locations": 5 (or a segment's path as a number) was a TypeError, a traceback."""
    point = {"point": "52.52°, 13.405°", "time": "2024-02-01T08:00:00Z"}
    good = {"semanticSegments": [{"timelinePath": 7}, {"timelinePath": [point]}]}
    for name, data in (("a.json", {"locations": 5, "rawSignals": {"x": 1}}), ("b.json", good)):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(HistoryFileError, match=r"a\.json holds no locations"):
        read_history(tmp_path / "a.json", WEEK)
    history = read_history(tmp_path / "b.json", WEEK)
    assert [(f.lat, f.lon) for f in history.fixes] == [(52.52, 13.405)]


async def test_one_point_and_one_stay_are_said_in_the_singular(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm)
    ana = await add_user(app, "ana-chat", name="ana")
    assert ana.id is not None
    await app.location.set_enabled(ana.id, True)
    env = {"LIFEBOT_DATA_DIR": str(make_settings(tmp_path).data_dir)}
    one = _gpx(WEEK_FIXES[:1], tmp_path / "one.gpx")
    code, out, err = await run_cli(
        "import", "location", str(one), "--user", "ana", cwd=tmp_path, env=env
    )
    assert code == 0, err
    assert out.startswith("Imported 1 point from one.gpx (gpx; 0 already there, 0 skipped): ")
    assert "0 stays between" in out
    code, out, err = await run_cli(
        "import", "location", str(one), "--user", "ana", cwd=tmp_path, env=env
    )
    assert out.startswith("Imported 0 points from one.gpx (gpx; 1 already there, 0 skipped)")
