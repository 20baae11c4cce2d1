"""OwnTracks and Overland through an httpx client against the web app (issue 24)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app.build import App
from bot.location.geo import Fix
from bot.location.stays import DetectedStay, detect_stays
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.support.app import add_user, channel
from tests.support.gps import PLACES, WEEK, generate, score
from tests.support.jobs import jobs_app, jobs_of
from tests.support.web import client_for


def basic(token: str, user: str = "ana") -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{token}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def owntracks(f: Fix) -> dict[str, object]:
    return {
        "_type": "location",
        "lat": f.lat,
        "lon": f.lon,
        "tst": int(f.ts.timestamp()),
        "acc": round(f.accuracy_m or 0),
        "tid": "an",
        "batt": 80,
    }


def feature(f: Fix, offset: str = "Z") -> dict[str, object]:
    ts = f.ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") + offset
    if offset != "Z":  # the same instant written with a -0700 offset
        ts = (f.ts.astimezone(UTC) - timedelta(hours=7)).strftime("%Y-%m-%dT%H:%M:%S") + offset
    return {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [f.lon, f.lat]},
        "properties": {"timestamp": ts, "horizontal_accuracy": f.accuracy_m, "battery_level": 0.8},
    }


async def turned_on(application: App, sender: str) -> tuple[int, str]:
    user = await add_user(application, sender, timezone="Europe/Berlin")
    assert user.id is not None
    await application.location.set_enabled(user.id, True)
    return user.id, await application.location.new_token(user.id)


async def points(application: App, user_id: int) -> int:
    from storage.repos.location import LocationRepo

    async with application.db.session() as s:
        return await LocationRepo(s).count_points(user_id)


async def test_a_week_through_owntracks_and_overland_gives_the_stays(tmp_path: Path) -> None:
    clock = ManualClock(WEEK - timedelta(days=1))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, ana_token = await turned_on(application, "ana")
        bob, bob_token = await turned_on(application, "bob")
        fixes, planted = generate(WEEK)
        clock.set(WEEK + timedelta(days=7, hours=1))
        half = 600  # Monday's night at home and the way to the office
        # Ana's phone: OwnTracks, one point per POST (the first 600 fixes, every 2nd)...
        for f in fixes[:half:2]:
            r = await client.post(
                "/api/location/owntracks", json=owntracks(f), headers=basic(ana_token)
            )
            assert r.status_code == 200, r.text
            assert r.json() == []
        # ... then Overland batches of 200, newest batch first (late and out of order).
        batches = [fixes[i : i + 200] for i in range(half, len(fixes), 200)]
        for n, batch in enumerate(reversed(batches)):
            body: dict[str, object] = {
                "locations": [feature(f, "-0700" if n % 2 else "Z") for f in batch]
            }
            if n == 0:
                body["current"] = feature(Fix(clock.now(), 0.0, 0.0, 5.0))
            r = await client.post("/api/location/overland", json=body, headers=bearer(ana_token))
            assert r.status_code == 200, r.text
            assert r.json()["result"] == "ok" and r.json()["skipped"] == 0
        # A repeated batch is stored once.
        before = await points(application, ana)
        r = await client.post(
            "/api/location/overland",
            json={"locations": [feature(f) for f in batches[0]]},
            headers=bearer(ana_token),
        )
        assert r.json()["result"] == "ok" and r.json()["stored"] == 0
        assert await points(application, ana) == before

        views = await application.location.stays(ana, WEEK, WEEK + timedelta(days=7))
        found = [v.stay for v in views]
        near_bar = [s for s in found if _near(s.lat, s.lon, "bar")]
        assert len(near_bar) == 1
        # Stays kept up to date request by request equal a detection over everything at once.
        at_once = detect_stays(fixes[:half:2] + fixes[half:])
        assert [(x.start, x.end) for x in found] == [(d.start, d.end) for d in at_once]
        s = score([DetectedStay(x.start, x.end, x.lat, x.lon, x.points) for x in found], planted)
        print("\nstored stays via OwnTracks + Overland:", {k: round(v, 2) for k, v in s.items()})
        assert s["precision"] >= 0.95
        assert s["recall"] >= 0.95
        assert s["start_median_min"] <= 3
        assert s["end_median_min"] <= 3
        # The current point (0, 0) is not history; Bob sees none of Ana's stays.
        assert not any(abs(s.lat) < 1 for s in found)
        assert await application.location.stays(bob, WEEK, WEEK + timedelta(days=7)) == []
        assert bob_token != ana_token


def _near(lat: float, lon: float, place: str) -> bool:
    from bot.location.geo import distance_m

    return distance_m(lat, lon, *PLACES[place]) < 100


async def test_other_owntracks_types_and_empty_bodies_are_accepted_and_ignored(
    tmp_path: Path,
) -> None:
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        for body in (
            {"_type": "transition", "event": "enter", "desc": "home", "tst": 1772366400},
            {"_type": "waypoint", "desc": "home", "lat": 1, "lon": 2, "rad": 50, "tst": 1},
            {"_type": "waypoints", "waypoints": []},
            {"_type": "status", "android": {}},
            {"_type": "lwt", "tst": 1},
        ):
            r = await client.post("/api/location/owntracks", json=body, headers=basic(token))
            assert (r.status_code, r.json()) == (200, [])
        r = await client.post("/api/location/owntracks", content=b"", headers=basic(token))
        assert (r.status_code, r.json()) == (200, [])
        assert await points(application, ana) == 0


async def test_bad_payloads_get_a_clear_4xx_and_lose_nothing(tmp_path: Path) -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        clock.set(now)
        good = Fix(now - timedelta(minutes=5), 52.52, 13.405, 10.0)
        r = await client.post("/api/location/owntracks", json=owntracks(good), headers=basic(token))
        assert r.status_code == 200
        assert await points(application, ana) == 1

        async def refused(path: str, body: object, headers: dict[str, str], status: int) -> str:
            r = await client.post(path, content=json.dumps(body).encode(), headers=headers)
            assert r.status_code == status, r.text
            assert await points(application, ana) == 1  # nothing lost, nothing half-stored
            return str(r.json()["detail"])

        ot, ov = "/api/location/owntracks", "/api/location/overland"
        loc = owntracks(Fix(now, 52.5, 13.4, 5))
        # (a location OwnTracks sent that cannot be stored is acknowledged: see below)
        assert "JSON" in await refused(ot, [loc], basic(token), 400)
        r = await client.post(ot, content=b"{not json", headers=basic(token))
        assert r.status_code == 400 and "JSON" in r.json()["detail"]
        assert "token" in await refused(ot, loc, basic("lbl_wrong"), 401)
        assert "token" in await refused(ot, loc, {}, 401)
        assert "token" in await refused(ov, {"locations": []}, bearer("nope"), 401)
        assert "token" in await refused(ov, {"locations": []}, basic(token), 401)

        # (a bad point inside an Overland batch is skipped, not refused: see below)
        good_f = feature(Fix(now, 52.5, 13.4, 5))
        assert "locations" in await refused(ov, {"points": []}, bearer(token), 400)
        r = await client.post(ov, content=b"[", headers=bearer(token))
        assert r.status_code == 400 and "JSON" in r.json()["detail"]
        huge = {"locations": [good_f] * 100_000}
        r = await client.post(ov, json=huge, headers=bearer(token))
        assert r.status_code == 413
        assert await points(application, ana) == 1
        few = {"locations": [good_f] * 1001}
        assert "at most 1000" in await refused(ov, few, bearer(token), 413)

        # A revoked token stops working at once.
        await application.location.revoke_token(ana)
        assert "token" in await refused(ot, loc, basic(token), 401)


async def test_location_off_stores_nothing_and_says_so(tmp_path: Path) -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now)
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        await application.location.set_enabled(ana, False)
        r = await client.post(
            "/api/location/overland",
            json={"locations": [feature(Fix(now, 52.5, 13.4, 5))]},
            headers=bearer(token),
        )
        assert r.status_code == 403
        assert "/location on" in r.json()["detail"]
        assert "result" not in r.json()
        assert await points(application, ana) == 0

        # The app keeps that point and sends it again once location is back on; it dates
        # from before /location on, so it is acknowledged and dropped (README says so).
        clock.set(now + timedelta(hours=1))
        await application.location.set_enabled(ana, True)
        queued = {"locations": [feature(Fix(now, 52.5, 13.4, 5))]}
        r = await client.post("/api/location/overland", json=queued, headers=bearer(token))
        assert r.status_code == 200 and r.json()["result"] == "ok"
        assert await points(application, ana) == 0
        fresh = {"locations": [feature(Fix(now + timedelta(hours=1), 52.5, 13.4, 5))]}
        r = await client.post("/api/location/overland", json=fresh, headers=bearer(token))
        assert r.status_code == 200 and await points(application, ana) == 1


async def test_a_client_without_a_content_length_is_capped_too(tmp_path: Path) -> None:
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        _, token = await turned_on(application, "ana")

        async def chunks() -> AsyncIterator[bytes]:  # streamed: no Content-Length header
            for _ in range(50):
                yield b" " * 100_000

        r = await client.post("/api/location/overland", content=chunks(), headers=bearer(token))
        assert r.status_code == 413


async def test_one_bad_point_in_an_overland_batch_does_not_jam_the_phone(tmp_path: Path) -> None:
    """Overland re-sends a batch until it hears {"result": "ok"}: the good points are kept,
    the bad ones skipped and counted, and the batch is acknowledged."""
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        clock.set(now)
        good = [feature(Fix(now - timedelta(minutes=m), 52.5, 13.4, 5)) for m in (30, 20, 10)]
        no_ts = {**good[0], "properties": {"horizontal_accuracy": 5}}
        odd_ts = {**good[0], "properties": {"timestamp": "secret-ish words"}}
        bad_lat = feature(Fix(now - timedelta(minutes=25), 999, 13.4, 5))
        not_a_point = {**good[0], "geometry": {"type": "LineString", "coordinates": []}}
        words = {**good[0], "geometry": {"type": "Point", "coordinates": ["east", "north"]}}
        batch = [good[0], no_ts, bad_lat, good[1], "a string", odd_ts, not_a_point, words, good[2]]
        r = await client.post(
            "/api/location/overland", json={"locations": batch}, headers=bearer(token)
        )
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["result"] == "ok"  # what Overland checks before deleting its queue
        assert (answer["stored"], answer["skipped"]) == (3, 6)
        why = " ".join(answer["skipped_why"])
        assert "location 1" in why and "timestamp" in why and "latitude" in why
        assert "secret-ish" not in why  # a refusal never echoes what was sent
        assert await points(application, ana) == 3
        # The phone sends the same batch again: nothing new, still acknowledged.
        again = await client.post(
            "/api/location/overland", json={"locations": batch}, headers=bearer(token)
        )
        assert again.json()["result"] == "ok" and again.json()["stored"] == 0
        # A batch of nothing but bad points is acknowledged too (else it would come forever).
        r = await client.post(
            "/api/location/overland", json={"locations": [no_ts, bad_lat]}, headers=bearer(token)
        )
        assert (r.status_code, r.json()["result"], r.json()["skipped"]) == (200, "ok", 2)
        assert await points(application, ana) == 3


async def test_a_point_stamped_at_the_ends_of_the_calendar_is_skipped_not_a_500(
    tmp_path: Path,
) -> None:
    # Year 1 at +14:00 (or 9999 at -14:00) is no instant in UTC: turning it to UTC raised
    # OverflowError, the whole batch was a 500 and Overland sent it again for ever.
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        clock.set(now)
        good = feature(Fix(now - timedelta(minutes=10), 52.5, 13.4, 5))
        ends = [
            {**good, "properties": {"timestamp": stamp}}
            for stamp in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00")
        ]
        r = await client.post(
            "/api/location/overland", json={"locations": [*ends, good]}, headers=bearer(token)
        )
        assert r.status_code == 200, r.text
        assert (r.json()["result"], r.json()["stored"], r.json()["skipped"]) == ("ok", 1, 2)
        assert "timestamp" in " ".join(r.json()["skipped_why"])
        assert await points(application, ana) == 1


async def test_points_stamped_ahead_of_the_server_clock_are_refused(tmp_path: Path) -> None:
    """A phone whose clock runs hours ahead would make "where was I" and the stays wrong: a
    point more than a few minutes ahead is skipped (counted) or, from OwnTracks, acknowledged
    and not stored; small skew is fine."""
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        clock.set(now)
        skewed = Fix(now + timedelta(minutes=2), 52.5, 13.4, 5)  # a phone a little fast
        ahead = [Fix(now + d, 48.1, 11.6, 5) for d in (timedelta(minutes=30), timedelta(hours=23))]
        batch = [feature(f) for f in (Fix(now - timedelta(minutes=9), 52.5, 13.4, 5), skewed)]
        batch += [feature(f) for f in ahead]
        r = await client.post(
            "/api/location/overland", json={"locations": batch}, headers=bearer(token)
        )
        assert r.status_code == 200, r.text
        assert (r.json()["result"], r.json()["stored"], r.json()["skipped"]) == ("ok", 2, 2)
        assert "ahead" in " ".join(r.json()["skipped_why"])
        r = await client.post(
            "/api/location/owntracks",
            json=owntracks(Fix(now + timedelta(hours=1), 48.1, 11.6, 5)),
            headers=basic(token),
        )
        assert (r.status_code, r.json()) == (200, []), r.text  # acknowledged, not stored
        assert await points(application, ana) == 2
        last = await application.location.last_point(ana)
        assert last is not None and last.ts == skewed.ts  # not the point from "tomorrow"


async def test_encrypted_owntracks_posts_are_acknowledged_and_the_person_told_once(
    tmp_path: Path,
) -> None:
    """A 422 left the points undelivered without a word (and, OwnTracks retrying a refused
    message first, held the later ones). Now the post gets 200 [] and its owner one plain
    message saying why and how to turn the encryption off."""
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        application.dispatcher.register(RecordingChannel("fake"))
        ana, token = await turned_on(application, "ana")
        await turned_on(application, "bob")
        clock.set(now)
        sealed = {"_type": "encrypted", "data": "1Vu7OwpW4lMnh28FB+el22GsCrlnggvEcp4H8GR9iKJ="}
        for _ in range(3):  # the app keeps posting: one message, not three
            r = await client.post("/api/location/owntracks", json=sealed, headers=basic(token))
            assert (r.status_code, r.json()) == (200, [])
        await jobs_of(application).plan_and_send(clock.now())
        told = channel(application).texts("ana")
        assert len(told) == 1, told
        assert "encrypt" in told[0] and "Encryption key" in told[0] and "OwnTracks" in told[0]
        assert channel(application).texts("bob") == []
        assert await points(application, ana) == 0
        # Once the key is removed, the points are stored as ever.
        r = await client.post(
            "/api/location/owntracks",
            json=owntracks(Fix(now - timedelta(minutes=1), 52.5, 13.4, 5)),
            headers=basic(token),
        )
        assert (r.status_code, await points(application, ana)) == (200, 1)


async def test_an_owntracks_location_that_cannot_be_stored_does_not_jam_the_phone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """OwnTracks keeps a message at the head of its queue until it gets a 2xx (Android
    re-queues it first and retries it for about a week, HttpMessageProcessorEndpoint.kt and
    MessageProcessor.kt; iOS retries it for good, Connection.m): a 4xx for a point that can
    never be stored held every later point behind it. It is acknowledged with ``[]`` now,
    not stored, and the reason is in the log."""
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        clock.set(now)
        loc = owntracks(Fix(now - timedelta(minutes=3), 52.5, 13.4, 5))
        unusable = [
            {k: v for k, v in loc.items() if k != "lat"},
            {**loc, "lat": 999},
            {**loc, "tst": int((now + timedelta(hours=1)).timestamp())},  # a clock an hour fast
            {**loc, "tst": "soon"},
        ]
        caplog.set_level(logging.INFO, logger="bot.web.location")
        for body in unusable:
            r = await client.post("/api/location/owntracks", json=body, headers=basic(token))
            assert (r.status_code, r.json()) == (200, []), r.text
        assert await points(application, ana) == 0
        logged = " ".join(r.getMessage() for r in caplog.records)
        assert "latitude" in logged and "ahead" in logged and "not stored" in logged
        assert "soon" not in logged  # a refusal never echoes what was sent
        # The next point in the phone's queue goes through as ever.
        r = await client.post("/api/location/owntracks", json=loc, headers=basic(token))
        assert (r.status_code, r.json(), await points(application, ana)) == (200, [], 1)


async def test_owntracks_android_with_an_accented_user_id_is_let_in(tmp_path: Path) -> None:
    """OwnTracks for Android builds its Basic header with OkHttp's ``Credentials.basic``, which
    encodes "user:password" as ISO-8859-1 (square/okhttp, okhttp3/Credentials.kt). With a User
    ID such as "José" (the README says any name will do) the header was not UTF-8, and the
    right token got 401 "Wrong or revoked location token"."""
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    clock = ManualClock(now - timedelta(hours=2))
    async with jobs_app(tmp_path, clock) as application, client_for(application) as client:
        ana, token = await turned_on(application, "ana")
        clock.set(now)
        for n, user in enumerate(("José", "Jürgen Ø", "Ана")):  # the last becomes "???"
            raw = f"{user}:{token}".encode("iso-8859-1", errors="replace")
            header = {"Authorization": "Basic " + base64.b64encode(raw).decode()}
            fix = Fix(now - timedelta(minutes=10 - n), 52.5, 13.4, 5)
            r = await client.post("/api/location/owntracks", json=owntracks(fix), headers=header)
            assert (r.status_code, r.json()) == (200, []), (user, r.text)
        assert await points(application, ana) == 3
        wrong = base64.b64encode(f"José:{token}x".encode("iso-8859-1")).decode()
        r = await client.post(
            "/api/location/owntracks",
            json=owntracks(Fix(now, 52.5, 13.4, 5)),
            headers={"Authorization": f"Basic {wrong}"},
        )
        assert r.status_code == 401
