"""The web page and REST API through httpx: sign-in, CSRF, isolation, tokens, health."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app.build import App
from bot.web.auth import LINK_LIMIT, LinkRateLimited
from storage.models import Proposal, ServerKey
from storage.repos.calendar import CalendarRepo, OutsideEvent
from storage.repos.facts import FactRepo
from storage.repos.messages import MessageRepo
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app
from tests.support.omi import post_chunk
from tests.support.web import client_for, csrf_of, login_form, seed, sign_in


async def test_a_link_signs_in_once_with_an_httponly_samesite_cookie(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    async with client_for(app) as client:
        assert (await client.get("/", follow_redirects=False)).headers["location"] == "/signin"
        url = await app.web.auth.issue_link(ann.id)
        secret = url.rsplit("/", 1)[1]
        # Opening the link (what a chat app's link preview does) spends nothing.
        page = await client.get(f"/login/{secret}")
        assert "Sign in" in page.text
        done = await client.post("/login", data=await login_form(client, secret))
        assert done.status_code == 303
        cookie = done.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=lax" in cookie
        today = await client.get("/")
        assert today.status_code == 200
        assert "Today" in today.text
    async with client_for(app) as other:
        again = await other.post("/login", data=await login_form(other, secret))
        assert again.status_code == 400
        assert "not valid any more" in again.text
        assert (await other.get("/", follow_redirects=False)).status_code == 303


async def test_a_link_expires_after_ten_minutes(tmp_path: Path) -> None:
    clock = ManualClock()
    async with jobs_app(tmp_path, clock) as application:
        ann = await add_user(application, "ann")
        assert ann.id is not None
        url = await application.web.auth.issue_link(ann.id)
        clock.advance(timedelta(minutes=11))
        async with client_for(application) as client:
            form = await login_form(client, url.rsplit("/", 1)[1])
            done = await client.post("/login", data=form)
            assert done.status_code == 400


async def test_forged_cookie_is_refused(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        await sign_in(app, client, ann)
        real = client.cookies["lifebot_session"]
        secret, _, _mac = real.rpartition(".")
        client.cookies.set("lifebot_session", f"{secret}.{'0' * 32}")
        assert (await client.get("/", follow_redirects=False)).status_code == 303


async def test_a_session_key_kept_in_a_file_before_signs_on_in_the_database(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Upgrading keeps browsers signed in: the old per-folder key moves into the database."""
    old_key = "0123456789abcdef" * 4
    (tmp_path / "data").mkdir(parents=True)
    (tmp_path / "data" / "web_secret").write_text(old_key)
    application = await app_factory(fake_llm)
    ann = await add_user(application, "ann")
    async with client_for(application) as client:
        await sign_in(application, client, ann)
        secret, _, mac = client.cookies["lifebot_session"].rpartition(".")
    expected = hmac.new(old_key.encode(), secret.encode(), hashlib.sha256).hexdigest()[:32]
    assert mac == expected
    async with application.db.session() as s:
        kept = await s.get(ServerKey, "web_session")
    assert kept is not None and kept.value == old_key  # every process now reads this one


async def test_web_command_sends_a_link_only_in_private_and_is_rate_limited(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    await app.dispatcher.handle(make_inbound("/web", sender="ann"))
    reply = channel(app).texts("ann")[-1]
    assert f"{app.settings.web_url}/login/" in reply
    group = make_inbound("/web", sender="ann", chat="group-1")
    group.private = False
    await app.dispatcher.handle(group)
    assert "private chat" in channel(app).texts("group-1")[-1]
    for _ in range(LINK_LIMIT - 1):
        await app.web.auth.issue_link(ann.id)
    with pytest.raises(LinkRateLimited):
        await app.web.auth.issue_link(ann.id)
    await app.dispatcher.handle(make_inbound("/web", sender="ann"))
    assert "wait a few minutes" in channel(app).texts("ann")[-1]


async def test_forms_without_the_csrf_token_are_refused_and_change_nothing(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    mine = await seed(app, ann, "my sister is Ana")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        for data in ({}, {"csrf": "wrong"}):
            refused = await client.post(f"/facts/{mine.fact_id}/forget", data=data)
            assert refused.status_code == 403
            refused = await client.post("/reminders", data={**data, "text": "in 5 minutes tea"})
            assert refused.status_code == 403
        async with app.db.session() as s:
            assert [f.id for f in await FactRepo(s).active(ann.id)] == [mine.fact_id]
        assert await app.web.service.reminders.reminders(ann) == []
        ok = await client.post(f"/facts/{mine.fact_id}/forget", data={"csrf": csrf})
        assert ok.status_code == 303
        async with app.db.session() as s:
            assert await FactRepo(s).active(ann.id) == []


async def test_one_user_never_reaches_anothers_objects(app: App) -> None:
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    assert ann.id is not None and bob.id is not None
    anns = await seed(app, ann, "ann's passport number is X123")
    await seed(app, bob, "bob likes tea")
    device, _ = await app.web.service.devices.add_device(ann, "ann-pendant")
    reminder = (
        await app.web.service.reminders.add_reminder(ann, "tomorrow at 9 to call mom")
    ).reminder
    async with client_for(app) as client:
        csrf = await sign_in(app, client, bob)
        for path in (f"/memory/message/{anns.message_id}", "/memory/episode/1"):
            assert (await client.get(path)).status_code == 404
        for path in (
            f"/facts/{anns.fact_id}/forget",
            f"/facts/{anns.fact_id}/edit",
            f"/reminders/{reminder.id}/cancel",
            f"/devices/{device.id}/revoke",
            f"/proposals/{anns.proposal_id}/accept",
        ):
            answer = await client.post(path, data={"csrf": csrf, "text": "hacked"})
            assert answer.status_code == 404, path
        assert (await client.get("/owner")).status_code == 404  # bob is not the owner
        facts_page = await client.get("/facts")
        assert "passport" not in facts_page.text
        search = await client.get("/memory", params={"q": "passport"})
        assert "X123" not in search.text
        _, token = await app.web.auth.new_api_token(bob.id, "bob's script", "write")
    api = {"Authorization": f"Bearer {token}"}
    async with client_for(app) as client:
        assert (
            await client.delete(f"/api/v1/facts/{anns.fact_id}", headers=api)
        ).status_code == 404
        assert (
            await client.delete(f"/api/v1/reminders/{reminder.id}", headers=api)
        ).status_code == 404
        assert (await client.delete(f"/api/v1/devices/{device.id}", headers=api)).status_code == 404
        accept = await client.post(f"/api/v1/proposals/{anns.proposal_id}/accept", headers=api)
        assert accept.status_code == 404
        facts = (await client.get("/api/v1/facts", headers=api)).json()["items"]
        assert [f["text"] for f in facts] == ["bob likes tea"]
        hits = (
            await client.get("/api/v1/memory/search", params={"q": "passport"}, headers=api)
        ).json()
        assert all("X123" not in h["text"] for h in hits["items"])
    # Nothing of ann's changed.
    assert [f.id for f in await app.web.service.facts.facts(ann)] == [anns.fact_id]
    assert [r.id for r in await app.web.service.reminders.reminders(ann)] == [reminder.id]
    assert [p.id for p in await app.web.service.calendar.proposals(ann)] == [anns.proposal_id]


async def test_api_token_works_until_revoked(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        made = await client.post(
            "/settings/tokens", data={"csrf": csrf, "name": "phone", "scope": "write"}
        )
        token = made.text.split('id="api-token">', 1)[1].split("<", 1)[0]
        assert token.startswith("lbk_")
    api = {"Authorization": f"Bearer {token}"}
    async with client_for(app) as client:
        assert (await client.get("/api/v1/facts")).status_code == 401
        created = await client.post(
            "/api/v1/reminders", json={"text": "in 20 minutes to check the oven"}, headers=api
        )
        assert created.status_code == 201, created.text
        rid = created.json()["id"]
        listed = (await client.get("/api/v1/reminders", headers=api)).json()["items"]
        assert [r["id"] for r in listed] == [rid]
        bad = await client.post("/api/v1/reminders", json={"text": "sometime maybe"}, headers=api)
        assert bad.status_code == 422
        assert (await client.delete(f"/api/v1/reminders/{rid}", headers=api)).status_code == 204
        added = await client.post("/api/v1/facts", json={"text": "I live in Porto"}, headers=api)
        assert added.status_code == 201
        me = await client.patch("/api/v1/settings", json={"timezone": "Lisbon"}, headers=api)
        assert me.json()["timezone"] == "Europe/Lisbon"
        wrong = await client.patch("/api/v1/settings", json={"quiet": "soon"}, headers=api)
        assert wrong.status_code == 422
        tokens = await app.web.auth.api_tokens(ann.id or 0)
        assert await app.web.auth.revoke_api_token(ann.id or 0, tokens[0].id or 0)
        assert (await client.get("/api/v1/facts", headers=api)).status_code == 401


async def test_sign_out_everywhere_ends_every_session(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as phone, client_for(app) as laptop:
        await sign_in(app, phone, ann)
        csrf = await sign_in(app, laptop, ann)
        out = await laptop.post("/signout", data={"csrf": csrf, "everywhere": "1"})
        assert out.status_code == 303
        assert (await phone.get("/", follow_redirects=False)).status_code == 303
        assert (await laptop.get("/", follow_redirects=False)).status_code == 303


async def test_export_and_delete_my_data(any_db_app: App) -> None:
    app = any_db_app
    ann = await add_user(app, "ann")
    bob = await add_user(app, "bob")
    assert ann.id is not None and bob.id is not None
    await seed(app, ann, "ann plays the cello")
    await seed(app, bob, "bob plays drums")
    await app.web.service.devices.add_device(ann, "ann-pendant")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        got = await client.get("/export")
        assert got.headers["content-type"] == "application/zip"
        files = zipfile.ZipFile(io.BytesIO(got.content))
        facts = json.loads(files.read("fact.json"))
        assert [f["text"] for f in facts] == ["ann plays the cello"]
        assert "bob" not in json.dumps([json.loads(files.read(n)) for n in files.namelist()])
        refused = await client.post("/delete", data={"csrf": csrf, "confirm": "nope"})
        assert refused.status_code == 303
        assert await app.web.service.accounts.user(ann.id) is not None
        gone = await client.post("/delete", data={"csrf": csrf, "confirm": "DELETE"})
        assert gone.headers["location"] == "/signin?deleted=1"
        assert (await client.get("/", follow_redirects=False)).status_code == 303
    assert await app.web.service.accounts.user(ann.id) is None
    assert [f.text for f in await app.web.service.facts.facts(bob)] == ["bob plays drums"]


async def test_health_readiness_and_metrics(any_db_app: App) -> None:
    app = any_db_app
    ann = await add_user(app, "ann")
    await seed(app, ann, "hello")
    async with client_for(app) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
        body = ready.json()
        assert body["checks"]["database"]["ok"]
        assert body["checks"]["migrations"]["ok"], body
        # Jobs are on but nobody leads yet (the scheduler was not started): not ready.
        assert ready.status_code == 503
        assert not body["checks"]["leader"]["ok"]
        metrics = (await client.get("/metrics")).text
        # Counters of this process (tests/test_metrics.py); gauges read from the database.
        assert "# TYPE lifebot_messages_total counter" in metrics
        assert "# TYPE lifebot_turn_seconds histogram" in metrics
        assert 'lifebot_outbox_pushes{status="pending"} 0.0' in metrics
        assert "# TYPE lifebot_push_lateness_seconds histogram" in metrics
        assert "lifebot_transcription_queue 0.0" in metrics
        assert "lifebot_turns_unanswered{" not in metrics
        async with app.db.session() as s:
            waiting = await MessageRepo(s).add(
                ann.id or 0, 1, role="user", text="?", direction="in", channel="fake"
            )
            await MessageRepo(s).set_status(ann.id or 0, waiting.id or 0, "pending_retry")
        metrics = (await client.get("/metrics")).text
        assert 'lifebot_turns_unanswered{channel="fake",status="pending_retry"} 1.0' in metrics


async def test_readiness_with_the_scheduler_leading(app_factory) -> None:
    application = await app_factory(jobs_heartbeat=0.2)
    await application.jobs.service.start()
    for _ in range(200):  # the first heartbeat takes the lease; on a busy machine it may lag
        if application.jobs.service.is_leader:
            break
        await asyncio.sleep(0.05)
    async with client_for(application) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["leader"]["detail"] == "this process"


def test_pages_carry_csrf_tokens() -> None:
    assert csrf_of('<input type="hidden" name="csrf" value="abc">') == "abc"


async def test_calendar_feed_url_serves_ics_until_turned_off(app: App) -> None:
    ann = await add_user(app, "ann")
    seeded = await seed(app, ann, "dinner plans")
    assert await app.web.service.calendar.answer_proposal(ann, seeded.proposal_id, True)
    assert ann.id is not None
    now = app.clock.now()
    soon = now + timedelta(days=2)
    offsite = OutsideEvent("offsite@team", "Team offsite", soon, soon, False, None)
    async with app.db.session() as s:
        await CalendarRepo(s).sync_outside(ann.id, "ics:1", [offsite], now, remove_missing=False)
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        made = await client.post("/calendar/feed", data={"csrf": csrf}, follow_redirects=True)
        url = made.text.split('id="feed-url">', 1)[1].split("<", 1)[0]
        path = "/" + url.split("/", 3)[3]
        feed = await client.get(path)
        assert feed.headers["content-type"].startswith("text/calendar")
        assert "SUMMARY:Dinner of ann" in feed.text
        # Events read from the person's own subscribed calendars are not published again: the
        # phone has them already, and a feed that republished them could read itself back.
        assert "Team offsite" not in feed.text
        # Calendar apps poll: a HEAD is answered, and the answer may be kept a few minutes.
        assert "private" in feed.headers["cache-control"]
        head = await client.head(path)
        assert head.status_code == 200 and head.content == b""
        await client.post("/calendar/feed", data={"csrf": csrf, "action": "off"})
        assert (await client.get(path)).status_code == 404
        assert (await client.get("/calendar/not-a-token.ics")).status_code == 404


async def test_settings_are_saved_and_bad_values_explained(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        form = {
            "csrf": csrf,
            "timezone": "Lisbon",
            "briefing_time": "6:45",
            "quiet": "23:00-06:30",
            "preferred_channel": "fake",
        }
        saved = await client.post("/settings", data=form, follow_redirects=True)
        assert "Settings saved." in saved.text
        user = await app.web.service.accounts.user(ann.id)
        assert user is not None
        assert (user.timezone, user.briefing_time, user.briefing_enabled) == (
            "Europe/Lisbon",
            "06:45",
            False,  # the box was not ticked
        )
        assert (user.quiet_start, user.quiet_end, user.preferred_channel) == (
            "23:00",
            "06:30",
            "fake",
        )
        bad = await client.post(
            "/settings",
            data={
                "csrf": csrf,
                "timezone": "Mars/Olympus",
                "quiet": "late",
                "briefing_enabled": "on",
            },
            follow_redirects=True,
        )
        assert "Mars/Olympus is neither a time zone nor a town I know" in bad.text
        assert "Quiet hours" in bad.text


async def test_owner_retries_a_failed_push(app: App) -> None:
    from storage.repos.outbox import OutboxRepo, Push

    ann = await add_user(app, "ann", owner=True)
    assert ann.id is not None
    now = app.clock.now()
    async with app.db.session() as s:
        await OutboxRepo(s).enqueue(
            [Push(ann.id, "notice", "k1", now, text="hi", status="failed", note="chat not found")],
            now,
        )
        row = await OutboxRepo(s).for_key("k1")
    assert row is not None
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        page = await client.get("/owner")
        assert "chat not found" in page.text
        done = await client.post(
            f"/owner/outbox/{row.id}/retry", data={"csrf": csrf}, follow_redirects=True
        )
        assert "queued again" in done.text
        again = await client.post(
            f"/owner/outbox/{row.id}/retry", data={"csrf": csrf}, follow_redirects=True
        )
        assert "is not a failed push" in again.text
    async with app.db.session() as s:
        fresh = await OutboxRepo(s).for_key("k1")
    assert fresh is not None
    assert fresh.status in ("pending", "sending", "delivered")


async def test_timeline_shows_a_day_and_opens_the_cited_turn(app: App) -> None:
    ann = await add_user(app, "ann")
    seeded = await seed(app, ann, "we walked to the lighthouse")
    today = app.clock.now().date().isoformat()
    async with client_for(app) as client:
        await sign_in(app, client, ann)
        day = await client.get("/memory", params={"day": today})
        assert "we walked to the lighthouse" in day.text
        opened = await client.get(f"/memory/message/{seeded.message_id}")
        assert f'id="m{seeded.message_id}" class="msg in cited"' in opened.text
        found = await client.get("/memory", params={"q": "lighthouse"})
        assert "<mark>lighthouse</mark>" in found.text


async def test_the_timeline_answers_a_day_no_one_lived_with_a_plain_refusal(app: App) -> None:
    # A hand-edited address (?day=0001-01-01) or a pager walked to the end was a 500: the
    # page worked out the day before and after it, past what a date can hold. And ?day=0
    # showed 1 January 1970 (a number read as seconds since then).
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        await sign_in(app, client, ann)
        for day in ("0001-01-01", "9999-12-31", "1899-12-31", "3000-01-01", "not-a-day", "0"):
            refused = await client.get("/memory", params={"day": day})
            assert refused.status_code == 422, day
            assert refused.headers["content-type"].startswith("text/html")
            assert "day" in refused.text
        first = await client.get("/memory", params={"day": "1900-01-01"})
        assert first.status_code == 200 and "Nothing on this day." in first.text
        assert "/memory?day=1899" not in first.text and "/memory?day=1900-01-02" in first.text
        last = await client.get("/memory", params={"day": "2999-12-31"})
        assert last.status_code == 200 and "Nothing on this day." in last.text
        assert "/memory?day=3000" not in last.text and "/memory?day=2999-12-30" in last.text


async def _ann_and_bob_headers(app: App) -> tuple[dict[str, str], dict[str, str]]:
    """API headers (write tokens) of two new users, ann's and bob's."""
    headers = []
    for name in ("ann", "bob"):
        user = await add_user(app, name)
        assert user.id is not None
        _, token = await app.web.auth.new_api_token(user.id, "script", "write")
        headers.append({"Authorization": f"Bearer {token}"})
    return headers[0], headers[1]


async def _used_and_given_up(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    """A pendant named "pendant" added, heard from once, then revoked: its row as listed."""
    made = await client.post("/api/v1/devices", json={"text": "pendant"}, headers=headers)
    assert made.status_code == 201
    used = await post_chunk(client, made.json()["token"], b"\0\0" * 16_000, 16_000)
    assert used.status_code == 200, used.text
    [seen] = (await client.get("/api/v1/devices", headers=headers)).json()["items"]
    gone = await client.delete(f"/api/v1/devices/{seen['id']}", headers=headers)
    assert gone.status_code == 204
    return dict(seen)


async def test_a_pendant_name_given_up_and_taken_by_another_starts_afresh(app: App) -> None:
    # Pendant names are one namespace (the name is the pendant's sender id), so a revoked
    # name may be taken by someone else. The row moved to them with its old dates: bob's
    # new pendant showed when ann's was made and when ann last used hers.
    hers, his = await _ann_and_bob_headers(app)
    async with client_for(app) as client:
        seen = await _used_and_given_up(client, hers)
        assert seen["last_seen_at"] is not None

        taken = await client.post("/api/v1/devices", json={"text": "pendant"}, headers=his)
        assert taken.status_code == 201
        [mine] = (await client.get("/api/v1/devices", headers=his)).json()["items"]
        assert mine["last_seen_at"] is None
        assert mine["created_at"] > seen["last_seen_at"]  # made now, not when hers was


async def test_a_pendant_name_taken_by_another_stays_in_the_first_owners_list(
    any_db_app: App,
) -> None:
    # The revoked row was handed to bob when he took its name: ann's own revoked pendant
    # vanished from her Devices page and GET /api/v1/devices, and its id became his.
    hers, his = await _ann_and_bob_headers(any_db_app)
    async with client_for(any_db_app) as client:
        await _used_and_given_up(client, hers)
        [revoked] = (await client.get("/api/v1/devices", headers=hers)).json()["items"]

        taken = await client.post("/api/v1/devices", json={"text": "pendant"}, headers=his)
        assert taken.status_code == 201
        [still] = (await client.get("/api/v1/devices", headers=hers)).json()["items"]
        assert still == revoked and still["revoked"]
        [his_one] = (await client.get("/api/v1/devices", headers=his)).json()["items"]
        assert his_one["id"] != still["id"] and not his_one["revoked"]
        assert his_one["last_seen_at"] is None
        # Her old id is not his to revoke, and his pendant's token works.
        mine = await client.delete(f"/api/v1/devices/{still['id']}", headers=his)
        assert mine.status_code == 404
        heard = await post_chunk(client, taken.json()["token"], b"\0\0" * 16_000, 16_000)
        assert heard.status_code == 200, heard.text

        # Given up again, the name comes back to ann: her own pendant, registered afresh.
        dropped = await client.delete(f"/api/v1/devices/{his_one['id']}", headers=his)
        assert dropped.status_code == 204
        again = await client.post("/api/v1/devices", json={"text": "pendant"}, headers=hers)
        assert again.status_code == 201
        [back] = (await client.get("/api/v1/devices", headers=hers)).json()["items"]
        assert back["id"] == still["id"] and not back["revoked"]
        [his_old] = (await client.get("/api/v1/devices", headers=his)).json()["items"]
        assert his_old["id"] == his_one["id"] and his_old["revoked"]


async def test_api_answers_proposals_and_manages_devices(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    seeded = await seed(app, ann, "lunch with Rui")
    _, token = await app.web.auth.new_api_token(ann.id, "script", "write")
    api = {"Authorization": f"Bearer {token}"}
    async with client_for(app) as client:
        waiting = (await client.get("/api/v1/proposals", headers=api)).json()["items"]
        assert [p["id"] for p in waiting] == [seeded.proposal_id]
        said = await client.post(f"/api/v1/proposals/{seeded.proposal_id}/accept", headers=api)
        assert said.json()["message"].startswith("Added")
        events = (await client.get("/api/v1/events", headers=api)).json()["items"]
        assert [e["title"] for e in events] == ["Dinner of ann"]
        assert (await client.get("/api/v1/proposals", headers=api)).json() == {
            "items": [],
            "next": None,
        }
        # Answered already: a conflict with its state (409, in words), not a 200 a script
        # reads as done (a decline after an accept left the event in the calendar).
        for path, body in [("accept", None), ("decline", None), ("rename", {"title": "Later"})]:
            again = await client.post(
                f"/api/v1/proposals/{seeded.proposal_id}/{path}", json=body, headers=api
            )
            assert again.status_code == 409, (path, again.text)
            assert again.json()["detail"] == "Dinner of ann is already in your calendar."
        events = (await client.get("/api/v1/events", headers=api)).json()["items"]
        assert [e["title"] for e in events] == ["Dinner of ann"]
        # Expired: 409 too, and the proposal is marked expired all the same.
        late = await seed(app, ann, "drinks")
        async with app.db.session() as s:
            gone = await s.get(Proposal, late.proposal_id)
            assert gone is not None
            gone.expires_at = app.clock.now() - timedelta(minutes=1)
            s.add(gone)
        again = await client.post(f"/api/v1/proposals/{late.proposal_id}/accept", headers=api)
        assert again.status_code == 409 and "has expired" in again.json()["detail"], again.text
        async with app.db.session() as s:
            expired = await s.get(Proposal, late.proposal_id)
        assert expired is not None and expired.status == "expired"
        bad = await client.post("/api/v1/devices", json={"text": "no spaces please"}, headers=api)
        assert bad.status_code == 422
        made = await client.post("/api/v1/devices", json={"text": "pendant-2"}, headers=api)
        assert made.status_code == 201
        assert made.json()["token"].startswith("lbd_")
        dev_id = made.json()["id"]
        assert (await client.delete(f"/api/v1/devices/{dev_id}", headers=api)).status_code == 204
        listed = (await client.get("/api/v1/devices", headers=api)).json()["items"]
        assert [d["revoked"] for d in listed] == [True]
        schema = (await client.get("/api/openapi.json")).json()
        assert "/api/v1/memory/search" in schema["paths"]


async def test_send_briefing_now_goes_through_the_outbox_once(app: App, fake_llm) -> None:
    from tests.fakes.llm import say

    ann = await add_user(app, "ann")
    fake_llm.add(say("Good morning, Ann! Nothing urgent today."))
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        for _ in range(2):  # a double click
            sent = await client.post("/briefing/send", data={"csrf": csrf}, follow_redirects=True)
            assert "on its way" in sent.text
    await app.jobs.outbox.run_due(app.clock.now())
    assert channel(app).texts("ann") == ["Good morning, Ann! Nothing urgent today."]


async def test_link_another_channel_from_the_settings_page(app: App) -> None:
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        page = await client.post("/settings/link", data={"csrf": csrf})
        code = page.text.split('id="link-code">', 1)[1].split("<", 1)[0]
        await app.dispatcher.handle(make_inbound(code, sender="ann-work-phone"))
        assert "confirm the link" in channel(app).texts("ann-work-phone")[-1]
        # Nothing is linked until Ann says yes on the page where she asked for the code.
        senders = {i.sender_id for i in await app.web.service.settings.identities(ann)}
        assert senders == {"ann"}
        page = await client.get("/settings")
        assert "Link fake ann-work-phone to your account?" in page.text
        action = page.text.split('action="/settings/link/', 1)[1].split('"', 1)[0]
        assert action.endswith("/yes")
        done = await client.post(f"/settings/link/{action}", data={"csrf": csrf})
        assert done.status_code in (200, 303)
    assert "Linked." in channel(app).texts("ann-work-phone")[-1]
    senders = {i.sender_id for i in await app.web.service.settings.identities(ann)}
    assert senders == {"ann", "ann-work-phone"}


async def test_unknown_pages_answer_a_plain_404(app: App) -> None:
    async with client_for(app) as client:
        page = await client.get("/no/such/page")
        assert page.status_code == 404
        assert "Not found." in page.text
        assert page.headers["content-type"].startswith("text/html")
        api = await client.get("/api/v1/no-such-thing")
        assert api.status_code == 404
        # One error shape for programs: RFC 9457 problem details.
        assert api.headers["content-type"] == "application/problem+json"
        assert api.json() == {
            "type": "about:blank",
            "title": "Not Found",
            "status": 404,
            "detail": "Not Found",
        }


async def test_a_token_is_read_only_unless_made_with_the_write_scope(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    mine = await seed(app, ann, "my sister is Ana")
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ann)
        # The page's form: no box ticked is a read-only token; the box gives write.
        page = await client.post("/settings/tokens", data={"csrf": csrf, "name": "agent"})
        reader = page.text.split('id="api-token">', 1)[1].split("<", 1)[0]
        page = await client.post(
            "/settings/tokens", data={"csrf": csrf, "name": "script", "scope": "write"}
        )
        writer = page.text.split('id="api-token">', 1)[1].split("<", 1)[0]
        assert "read only" in page.text and "read and write" in page.text
        look = {"Authorization": f"Bearer {reader}"}
        change = {"Authorization": f"Bearer {writer}"}
        # Looking works with either token.
        for headers in (look, change):
            facts = await client.get("/api/v1/facts", headers=headers)
            assert [f["id"] for f in facts.json()["items"]] == [mine.fact_id]
        # The read-only token changes nothing, whatever the method, and says why.
        refused = [
            await client.delete(f"/api/v1/facts/{mine.fact_id}", headers=look),
            await client.post("/api/v1/facts", json={"text": "I like tea"}, headers=look),
            await client.post(
                "/api/v1/reminders", json={"text": "tomorrow at 9 call mum"}, headers=look
            ),
            await client.post("/api/v1/tokens", json={"scope": "write"}, headers=look),
        ]
        assert [r.status_code for r in refused] == [403] * 4
        assert "read-only" in refused[0].json()["detail"]
        async with app.db.session() as s:
            assert [f.id for f in await FactRepo(s).active(ann.id)] == [mine.fact_id]
        assert await app.web.service.reminders.reminders(ann) == []
        assert len((await client.get("/api/v1/tokens", headers=look)).json()["items"]) == 2
        # The write token may change things, and make tokens of either scope by API.
        made = await client.post(
            "/api/v1/tokens", json={"name": "mcp", "scope": "read"}, headers=change
        )
        assert made.status_code == 201
        assert made.json()["scope"] == "read" and made.json()["token"].startswith("lbk_")
        listed = (await client.get("/api/v1/tokens", headers=change)).json()["items"]
        assert sorted(t["scope"] for t in listed) == ["read", "read", "write"]
        assert all("token" not in t for t in listed)  # secrets are shown once, never listed
        gone = await client.delete(f"/api/v1/facts/{mine.fact_id}", headers=change)
        assert gone.status_code == 204
        revoked = await client.delete(f"/api/v1/tokens/{made.json()['id']}", headers=change)
        assert revoked.status_code == 204
        fresh = {"Authorization": f"Bearer {made.json()['token']}"}
        assert (await client.get("/api/v1/me", headers=fresh)).status_code == 401
