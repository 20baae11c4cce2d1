"""Places on the web page and in /api/v1/places: list, rename, mark, delete, isolation (#24)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from bot.location.geo import Fix
from tests.fakes.clock import ManualClock
from tests.support.app import add_user
from tests.support.gps import PLACES, WEEK, stay_at
from tests.support.jobs import jobs_app
from tests.support.web import client_for, said, sign_in


async def test_places_page_and_api_rename_mark_and_delete_for_their_owner_only(
    tmp_path: Path,
) -> None:
    clock = ManualClock(WEEK)
    async with jobs_app(tmp_path, clock) as app:
        ann = await add_user(app, "ann", timezone="Europe/Berlin")
        bob = await add_user(app, "bob", timezone="Europe/Berlin")
        assert ann.id is not None and bob.id is not None
        await app.location.set_enabled(ann.id, True)
        clock.set(WEEK + timedelta(days=1))
        await app.location.ingest(
            ann.id, stay_at(PLACES["gym"], WEEK + timedelta(hours=18), 60), "owntracks"
        )
        await app.location.ingest(ann.id, [Fix(clock.now(), *PLACES["home"], 5)], "x")
        gym = await app.location.add_place(ann.id, "gym", *PLACES["gym"])
        home = await app.location.add_place(ann.id, "home", *PLACES["home"])
        assert gym.id is not None and home.id is not None

        async with client_for(app) as web:
            csrf = await sign_in(app, web, ann)
            page = await web.get("/places")
            assert page.status_code == 200
            assert f'id="place-{gym.id}"' in page.text and "home" in page.text
            done = await web.post(
                f"/places/{gym.id}/rename", data={"csrf": csrf, "name": "fitness"}
            )
            assert "note=Saved: fitness" in await said(web, done)
            clash = await web.post(
                f"/places/{home.id}/rename", data={"csrf": csrf, "name": "Fitness"}
            )
            assert "already have" in await said(web, clash)
            await web.post(f"/places/{home.id}/kind/home", data={"csrf": csrf})
            page = await web.get("/places")
            assert "fitness" in page.text and "(home-like)" in page.text
            # A form without the session's CSRF token is refused.
            forged = await web.post(f"/places/{home.id}/delete", data={"csrf": "x"})
            assert forged.status_code == 403
        # The stays follow the new name: "when did I last go to fitness?"
        stays = await app.location.stays(ann.id, WEEK, WEEK + timedelta(days=1))
        assert [v.place.name for v in stays if v.place is not None] == ["fitness"]

        async with client_for(app) as web:
            await sign_in(app, web, bob)
            assert "no places yet" in (await web.get("/places")).text
            csrf_bob = await sign_in(app, web, bob)
            stolen = await web.post(
                f"/places/{gym.id}/rename", data={"csrf": csrf_bob, "name": "mine"}
            )
            assert stolen.status_code == 404

        _, ann_token = await app.web.auth.new_api_token(ann.id, "script", "write")
        _, bob_token = await app.web.auth.new_api_token(bob.id, "script", "write")
        api = {"Authorization": f"Bearer {ann_token}"}
        other = {"Authorization": f"Bearer {bob_token}"}
        async with client_for(app) as web:
            listed = (await web.get("/api/v1/places", headers=api)).json()["items"]
            assert [(p["name"], p["kind"]) for p in listed] == [
                ("fitness", "normal"),
                ("home", "home"),
            ]
            assert (await web.get("/api/v1/places", headers=other)).json()["items"] == []
            assert (await web.get("/api/v1/places")).status_code == 401
            changed = await web.patch(
                f"/api/v1/places/{gym.id}", headers=api, json={"kind": "ignored"}
            )
            assert changed.status_code == 200 and changed.json()["kind"] == "ignored"
            bad = await web.patch(f"/api/v1/places/{gym.id}", headers=api, json={"kind": "secret"})
            assert bad.status_code == 422
            clash = await web.patch(f"/api/v1/places/{gym.id}", headers=api, json={"name": "HOME"})
            assert clash.status_code == 409 and "already have" in clash.json()["detail"]
            blank = await web.patch(f"/api/v1/places/{gym.id}", headers=api, json={"name": "  "})
            assert blank.status_code == 422, blank.text  # not a clash: no name at all
            assert blank.json()["detail"] == "A place name is 1 to 60 characters."
            hidden = await web.patch(f"/api/v1/places/{gym.id}", headers=other, json={"name": "x"})
            assert hidden.status_code == 404
            assert (await web.delete(f"/api/v1/places/{gym.id}", headers=other)).status_code == 404
            assert (await web.delete(f"/api/v1/places/{gym.id}", headers=api)).status_code == 204
            assert [
                p["name"] for p in (await web.get("/api/v1/places", headers=api)).json()["items"]
            ] == ["home"]
        stays = await app.location.stays(ann.id, WEEK, WEEK + timedelta(days=1))
        assert all(v.place is None for v in stays)  # the gym's stays are unnamed again


async def test_proposals_on_the_web_are_renamed_and_a_new_place_is_named(tmp_path: Path) -> None:
    clock = ManualClock(WEEK)
    async with jobs_app(tmp_path, clock) as app:
        ann = await add_user(app, "ann", timezone="Europe/Berlin")
        bob = await add_user(app, "bob", timezone="Europe/Berlin")
        assert ann.id is not None and bob.id is not None
        await app.location.set_enabled(ann.id, True)
        await app.location.ingest(ann.id, [Fix(clock.now(), *PLACES["gym"], 5)], "x")
        await app.location.add_place(ann.id, "gym", *PLACES["gym"])
        fixes = stay_at(PLACES["gym"], WEEK + timedelta(hours=17), 60)
        fixes += stay_at(PLACES["bar"], WEEK + timedelta(hours=19), 90, seed=2)
        clock.set(WEEK + timedelta(hours=21))
        await app.location.ingest(ann.id, fixes, "owntracks")
        await app.location_proposals.scan(clock.set(WEEK + timedelta(hours=21, minutes=35)))
        gym_p, bar_p = [
            p for p in await app.web.service.calendar.proposals(ann) if p.source == "location"
        ]
        assert gym_p.place == "gym" and bar_p.place is None

        async with client_for(app) as web:
            csrf = await sign_in(app, web, ann)
            today = (await web.get("/")).text
            assert f'action="/proposals/{gym_p.id}/rename"' in today
            assert "What was this place?" in today  # the bar's form names the place
            done = await web.post(
                f"/proposals/{bar_p.id}/rename", data={"csrf": csrf, "title": "Kiezbar"}
            )
            assert "Saved the place Kiezbar" in await said(web, done)
            done = await web.post(
                f"/proposals/{gym_p.id}/rename", data={"csrf": csrf, "title": "Bouldering"}
            )
            assert "Renamed" in await said(web, done)
        titles = sorted(p.title for p in await app.web.service.calendar.proposals(ann))
        assert titles[0] == "Bouldering" and titles[1].startswith("Time at Kiezbar, 19:")
        assert "Kiezbar" in [p.name for p in await app.location.places(ann.id)]

        _, bob_token = await app.web.auth.new_api_token(bob.id, "script", "write")
        _, ann_token = await app.web.auth.new_api_token(ann.id, "script", "write")
        async with client_for(app) as web:
            theirs = await web.post(
                f"/api/v1/proposals/{gym_p.id}/rename",
                headers={"Authorization": f"Bearer {bob_token}"},
                json={"title": "Mine"},
            )
            assert theirs.status_code == 404
            mine = await web.post(
                f"/api/v1/proposals/{gym_p.id}/rename",
                headers={"Authorization": f"Bearer {ann_token}"},
                json={"title": "Bouldering with Ana"},
            )
            assert mine.status_code == 200 and "Bouldering with Ana" in mine.json()["message"]
