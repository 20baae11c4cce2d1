"""Your own calendars on the web page and in /api/v1/calendars: add a feed, see it with its
secret hidden, refresh, remove with its events, refusals, isolation (#16)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from caldav.davclient import DAVClient

from bot.app.build import App
from bot.jobs.calendars.caldav import new_key
from bot.jobs.calendars.own import shown_url
from storage.repos.calendar import CalendarRepo
from storage.repos.calendar_sources import CalendarSourceRepo
from tests.fakes.clock import ManualClock
from tests.fakes.ics_feed import FakeFeed
from tests.support.app import add_user
from tests.support.calendars import ics_body
from tests.support.jobs import jobs_app
from tests.support.radicale import radicale
from tests.support.web import client_for, said, sign_in

NOW = datetime(2025, 6, 2, 6, 0, tzinfo=UTC)
SECRET = "s3cr3tFeedToken9f8e7d6c"
TWO = ics_body(("a@t", "20250603T090000", "Dentist"), ("b@t", "20250604T120000", "Lunch"))


@pytest.fixture
async def fake_feed() -> AsyncIterator[FakeFeed]:
    served = FakeFeed(TWO)
    await served.start()
    yield served
    await served.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest) -> dict[str, Any]:
    """App overrides for SQLite (the default), then a throwaway PostgreSQL database."""
    if request.param == "postgres":
        return {"database_url_setting": request.getfixturevalue("migrated_postgres_url")}
    return {}


async def titles(app: App, user_id: int) -> list[str]:
    async with app.db.session() as s:
        return [e.title for e in await CalendarRepo(s).all_events(user_id)]


async def source_ids(app: App, user_id: int) -> list[int]:
    async with app.db.session() as s:
        return [c.id or 0 for c in await CalendarSourceRepo(s).of_user(user_id)]


def card(html: str, source_id: int) -> str:
    """One calendar's card on the page."""
    m = re.search(rf'<li id="calendar-{source_id}">(.*?)</li>', html, re.DOTALL)
    assert m is not None, f"no card for calendar {source_id}"
    return m.group(1)


async def test_the_page_adds_shows_refreshes_and_removes_a_feed_for_its_owner_only(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    async with jobs_app(tmp_path, ManualClock(NOW), calendar_allow_private=True) as app:
        ann = await add_user(app, "ann")
        bob = await add_user(app, "bob")
        assert ann.id is not None and bob.id is not None
        secret_url = f"{fake_feed.url}?token={SECRET}"

        async with client_for(app) as web:
            csrf = await sign_in(app, web, ann)
            empty = await web.get("/calendars")
            assert empty.status_code == 200
            assert 'href="/calendars"' in empty.text  # the nav link
            assert "no calendars linked yet" in empty.text

            # A form without the session's CSRF token is refused and adds nothing.
            forged = await web.post("/calendars/add", data={"csrf": "x", "url": secret_url})
            assert forged.status_code == 403
            assert fake_feed.hits == 0 and await source_ids(app, ann.id) == []

            # Not an address: the chat command's words, on the page; nothing stored.
            bad = await web.post("/calendars/add", data={"csrf": csrf, "url": "my calendar"})
            words = await said(web, bad)
            assert "error=I could not subscribe: that is not a calendar address" in words
            assert await source_ids(app, ann.id) == []

            added = await web.post(
                "/calendars/add", data={"csrf": csrf, "url": secret_url, "name": "Work"}
            )
            words = await said(web, added)
            assert "note=Subscribed to Work" in words and "2 event(s) read" in words
            (work,) = await source_ids(app, ann.id)
            again = await web.post("/calendars/add", data={"csrf": csrf, "url": secret_url})
            assert f"already subscribed to that calendar (#{work})" in await said(web, again)
            assert await source_ids(app, ann.id) == [work]

            page = (await web.get("/calendars")).text
            shown = card(page, work)
            assert "Work" in shown and "ICS feed, read-only" in shown
            assert "2 event(s)" in shown and "read Mon 02 Jun 2025 06:00" in shown
            assert "/cal.ics?token=…" in shown
            assert SECRET not in page  # the address's secret part is never on the page
            assert "Dentist" in (await web.get("/calendar")).text

            # Refresh now: the feed changed; then the server breaks (its events stay).
            fake_feed.body = ics_body(
                ("a@t", "20250603T090000", "Dentist"),
                ("b@t", "20250604T120000", "Lunch"),
                ("c@t", "20250605T080000", "Flight"),
            )
            hits = fake_feed.hits
            fresh = await web.post(f"/calendars/{work}/refresh", data={"csrf": csrf})
            assert "note=Read Work: 3 event(s)" in await said(web, fresh)
            assert fake_feed.hits == hits + 1
            fake_feed.status = 500
            broken = await web.post(f"/calendars/{work}/refresh", data={"csrf": csrf})
            words = await said(web, broken)
            assert "error=Could not read Work: the calendar server answered 500" in words
            shown = card((await web.get("/calendars")).text, work)
            assert "Last read failed: the calendar server answered 500" in shown
            assert "3 event(s)" in shown
            assert sorted(await titles(app, ann.id)) == ["Dentist", "Flight", "Lunch"]

        # Bob sees none of it and can change none of it: 404, as for any other page's ids.
        async with client_for(app) as web:
            csrf_bob = await sign_in(app, web, bob)
            page = (await web.get("/calendars")).text
            assert "no calendars linked yet" in page and 'id="calendar-' not in page
            assert "Dentist" not in (await web.get("/calendar")).text
            for action in ("refresh", "delete"):
                stolen = await web.post(f"/calendars/{work}/{action}", data={"csrf": csrf_bob})
                assert stolen.status_code == 404
        assert await source_ids(app, ann.id) == [work]
        assert len(await titles(app, ann.id)) == 3

        async with client_for(app) as web:
            csrf = await sign_in(app, web, ann)
            gone = await web.post(f"/calendars/{work}/delete", data={"csrf": csrf})
            assert "note=Removed Work and its 3 event(s)" in await said(web, gone)
            assert "no calendars linked yet" in (await web.get("/calendars")).text
        assert await source_ids(app, ann.id) == []
        assert await titles(app, ann.id) == []  # its events went with it


async def test_the_api_lists_adds_refreshes_and_deletes_calendars_per_token(
    tmp_path: Path, fake_feed: FakeFeed, database: dict[str, Any]
) -> None:
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock, calendar_allow_private=True, **database) as app:
        ann = await add_user(app, "ann")
        bob = await add_user(app, "bob")
        assert ann.id is not None and bob.id is not None
        _, ann_token = await app.web.auth.new_api_token(ann.id, "script", "write")
        _, bob_token = await app.web.auth.new_api_token(bob.id, "script", "write")
        api = {"Authorization": f"Bearer {ann_token}"}
        other = {"Authorization": f"Bearer {bob_token}"}
        secret_url = f"{fake_feed.url}?token={SECRET}"

        async with client_for(app) as web:
            assert (await web.get("/api/v1/calendars")).status_code == 401
            assert (await web.post("/api/v1/calendars", json={"url": secret_url})).status_code == (
                401
            )
            assert fake_feed.hits == 0
            assert (await web.get("/api/v1/calendars", headers=api)).json()["items"] == []

            refused = await web.post("/api/v1/calendars", headers=api, json={"url": "ftp://x/y"})
            assert refused.status_code == 422
            assert "not a calendar address" in refused.json()["detail"]
            assert "Nothing was added" in refused.json()["detail"]

            made = await web.post(
                "/api/v1/calendars", headers=api, json={"url": secret_url, "name": "Work"}
            )
            assert made.status_code == 201, made.text
            work = made.json()
            assert work["name"] == "Work" and work["kind"] == "ics" and work["events"] == 2
            assert work["address"] == shown_url(secret_url) and SECRET not in made.text
            assert work["last_read_at"].startswith("2025-06-02T06:00")
            assert work["last_error"] is None
            again = await web.post("/api/v1/calendars", headers=api, json={"url": secret_url})
            assert again.status_code == 200 and again.json()["id"] == work["id"]
            # Bob subscribing to the same address gets a calendar of his own.
            bobs = await web.post("/api/v1/calendars", headers=other, json={"url": fake_feed.url})
            assert bobs.status_code == 201 and bobs.json()["id"] != work["id"]

            listed = (await web.get("/api/v1/calendars", headers=api)).json()["items"]
            assert [c["id"] for c in listed] == [work["id"]] and SECRET not in str(listed)
            assert [
                c["id"] for c in (await web.get("/api/v1/calendars", headers=other)).json()["items"]
            ] == [bobs.json()["id"]]

            fake_feed.status = 500
            failed = await web.post(f"/api/v1/calendars/{work['id']}/refresh", headers=api)
            assert failed.status_code == 200
            assert failed.json()["last_error"] == "the calendar server answered 500"
            assert failed.json()["events"] == 2
            fake_feed.status = 200
            for verb in ("post", "delete"):
                path = f"/api/v1/calendars/{work['id']}" + ("/refresh" if verb == "post" else "")
                hidden = await web.request(verb.upper(), path, headers=other)
                assert hidden.status_code == 404, (verb, hidden.text)
            assert (await web.delete("/api/v1/calendars/999", headers=api)).status_code == 404

            assert sorted(await titles(app, ann.id)) == ["Dentist", "Lunch"]
            done = await web.delete(f"/api/v1/calendars/{work['id']}", headers=api)
            assert done.status_code == 204
            assert (await web.get("/api/v1/calendars", headers=api)).json()["items"] == []
        assert await titles(app, ann.id) == []
        assert sorted(await titles(app, bob.id)) == ["Dentist", "Lunch"]  # bob's stay


async def test_an_address_on_this_machine_is_refused_on_the_page_and_api_and_never_fetched(
    tmp_path: Path, fake_feed: FakeFeed
) -> None:
    # The default: LIFEBOT_CALENDAR_ALLOW_PRIVATE is off, and the fake feed is on loopback.
    async with jobs_app(tmp_path, ManualClock(NOW)) as app:
        ann = await add_user(app, "ann")
        assert ann.id is not None
        _, token = await app.web.auth.new_api_token(ann.id, "script", "write")
        async with client_for(app) as web:
            csrf = await sign_in(app, web, ann)
            refused = await web.post("/calendars/add", data={"csrf": csrf, "url": fake_feed.url})
            words = await said(web, refused)
            assert "error=I could not subscribe: that address is on this machine or a private" in (
                words
            )
            assert "Nothing was added" in words
            page = (await web.get(refused.headers["location"])).text
            # Said once: opening the page again does not repeat it.
            assert "that address is on this machine or a private network" not in page
            assert "no calendars linked yet" in page
            by_api = await web.post(
                "/api/v1/calendars",
                headers={"Authorization": f"Bearer {token}"},
                json={"url": fake_feed.url.replace("http://", "webcal://")},
            )
            assert by_api.status_code == 422
            assert "private network" in by_api.json()["detail"]
        assert fake_feed.hits == 0
        assert await source_ids(app, ann.id) == [] and await titles(app, ann.id) == []


def _radicale_calendar(base: str, user: str, password: str) -> Any:
    """The user's calendar on Radicale with one event (Any: caldav returns "X | Coroutine")."""
    client: Any = DAVClient(base, username=user, password=password)
    cal = client.get_principal().make_calendar(name="Personal", cal_id="personal")
    cal.add_event(
        dtstart=datetime(2025, 6, 3, 15, 0, tzinfo=UTC),
        dtend=datetime(2025, 6, 3, 16, 0, tzinfo=UTC),
        summary="Team offsite",
        uid="offsite@radicale",
    )
    return cal


async def test_a_caldav_calendar_linked_on_the_command_line_is_shown_refreshed_and_removed(
    tmp_path: Path,
) -> None:
    with radicale(tmp_path / "dav", {"ann": "s3cret-pw"}) as base:
        cal = await asyncio.to_thread(_radicale_calendar, base, "ann", "s3cret-pw")
        async with jobs_app(
            tmp_path,
            ManualClock(NOW),
            calendar_key=new_key(),
            calendar_allow_private=True,  # Radicale runs on loopback
        ) as app:
            ann = await add_user(app, "ann")
            assert ann.id is not None
            await app.jobs.calendars.add_caldav(ann, str(cal.url), "ann", "s3cret-pw", "Home")
            (home,) = await source_ids(app, ann.id)
            async with client_for(app) as web:
                csrf = await sign_in(app, web, ann)
                page = (await web.get("/calendars")).text
                shown = card(page, home)
                assert "Home" in shown and "CalDAV, two-way" in shown and "1 event(s)" in shown
                assert "s3cret-pw" not in page
                await asyncio.to_thread(
                    cal.add_event,
                    dtstart=datetime(2025, 6, 4, 9, 0, tzinfo=UTC),
                    dtend=datetime(2025, 6, 4, 10, 0, tzinfo=UTC),
                    summary="Dentist",
                    uid="dentist@radicale",
                )
                fresh = await web.post(f"/calendars/{home}/refresh", data={"csrf": csrf})
                assert "note=Read Home: 2 event(s)" in await said(web, fresh)
                gone = await web.post(f"/calendars/{home}/delete", data={"csrf": csrf})
                assert "note=Removed Home and its 2 event(s)" in await said(web, gone)
            assert await source_ids(app, ann.id) == [] and await titles(app, ann.id) == []


def test_shown_url_hides_every_part_that_may_be_a_secret() -> None:
    google = (
        "https://calendar.google.com/calendar/ical/alice%40gmail.com/"
        "private-0f3a9c2b7d1e4f5a6b7c8d9e0f1a2b3c/basic.ics"
    )
    assert shown_url(google) == "https://calendar.google.com/calendar/ical/…/…/basic.ics"
    icloud = "https://p52-caldav.icloud.com/published/2/MTAxNjM0NzQ0NDUxMDE2M2ZxVn5x2D9KcLu"
    assert shown_url(icloud) == "https://p52-caldav.icloud.com/published/2/…"
    login = "https://alice:hunter2@cal.example.org:8443/feeds/team.ics?token=abc&x=1#frag"
    assert shown_url(login) == "https://…@cal.example.org:8443/feeds/team.ics?token=…&x=…"
    plain = "https://www.officeholidays.com/ics/germany"
    assert shown_url(plain) == plain


async def test_an_address_too_long_in_bytes_is_refused_plainly(
    any_db_app: App, fake_feed: FakeFeed
) -> None:
    """Under 2048 characters but not under 2048 bytes (letters outside ASCII): refused in
    words, nothing stored. PostgreSQL cannot index a calendar address much longer (the one
    calendar per address index); it answered 500 ("index row size exceeds btree maximum")."""
    from dataclasses import replace

    calendars = any_db_app.jobs.calendars
    calendars.settings = replace(calendars.settings, allow_private=True)  # the feed's loopback
    fake_feed.body = ics_body()
    ann = await add_user(any_db_app, "ann")
    assert ann.id is not None
    _, token = await any_db_app.web.auth.new_api_token(ann.id, "script", "write")
    api = {"Authorization": f"Bearer {token}"}
    words = "".join(chr(0x4E00 + n * 7) for n in range(1000))  # 3,000 bytes, none repeated
    long = f"{fake_feed.url}#{words}"  # a fragment: not sent, so the feed is read
    async with client_for(any_db_app) as web:
        refused = await web.post("/api/v1/calendars", headers=api, json={"url": long})
        assert refused.status_code == 422, refused.text
        assert "not a calendar address" in refused.json()["detail"]
        assert (await web.get("/api/v1/calendars", headers=api)).json()["items"] == []
