"""An API a developer can rely on (issue 31): the OpenAPI document describes /api/v1 only,
with its bearer scheme and errors; every list is a page walked by cursor; one error shape;
201 only when something was created.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx

from bot.app.build import App
from bot.web.paging import MAX_LIMIT, Position, make_cursor
from storage.models import Reminder
from storage.repos.calendar import CalendarRepo, OutsideEvent
from storage.repos.facts import FactRepo
from storage.repos.people import ContactRepo
from storage.repos.reminders import ReminderRepo
from tests.support.app import add_user
from tests.support.web import client_for

PROBLEM = "application/problem+json"
WRITES = {"post", "put", "patch", "delete"}


def _is_problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    body: dict[str, Any] = answer.json()
    assert body["type"] == "about:blank" and body["status"] == status
    assert body["title"] and body["detail"]
    return body


def _schema_of(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref:
        found: dict[str, Any] = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
        return found
    return node


async def _token(app: App, name: str, *, write: bool = True) -> tuple[int, dict[str, str]]:
    user = await add_user(app, name)
    assert user.id is not None
    _, token = await app.web.auth.new_api_token(user.id, "test", "write" if write else "read")
    return user.id, {"Authorization": f"Bearer {token}"}


async def test_the_document_describes_the_api_its_security_and_its_errors(app: App) -> None:
    async with client_for(app) as web:
        doc = (await web.get("/api/openapi.json")).json()
    scheme = doc["components"]["securitySchemes"]["bearer"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    assert "Problem" in doc["components"]["schemas"]
    lists = 0
    for path, item in doc["paths"].items():
        assert path.startswith("/api/v1/"), f"{path} is not part of the API"
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            assert op.get("security") == [{"bearer": []}], where
            codes = set(op["responses"])
            assert "401" in codes, where
            if method in WRITES:
                assert "403" in codes, where
            if "{" in path:
                assert "404" in codes, where
            params = {p["name"] for p in op.get("parameters", [])}
            if params or "requestBody" in op:
                assert "422" in codes, where
            for code, answer in op["responses"].items():
                content = answer.get("content", {})
                assert "text/html" not in content, f"{where} answers a page"
                if code[0] in "45":
                    assert set(content) == {PROBLEM}, f"{where} {code}"
                    assert content[PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}
            body = op.get("requestBody", {}).get("content", {})
            assert "application/x-www-form-urlencoded" not in body, f"{where} is a form post"
            ok = op["responses"].get("200", {}).get("content", {}).get("application/json")
            if method == "get" and ok:
                schema = _schema_of(doc, ok["schema"])
                assert schema.get("type") != "array", f"{where} answers a bare list, no page"
                if "items" in schema.get("properties", {}):
                    lists += 1
                    assert {"limit", "cursor"} <= params, f"{where} is a list without paging"
                    assert "next" in schema["properties"], where
                    assert "400" in codes, where
    assert lists >= 10  # facts, reminders, events, proposals, devices, tokens, places, ...
    assert "/api/v1/memory/search" in doc["paths"]
    assert "409" in doc["paths"]["/api/v1/devices"]["post"]["responses"]
    assert "409" in doc["paths"]["/api/v1/contacts/{contact_id}"]["patch"]["responses"]


async def _walk(
    web: httpx.AsyncClient, path: str, headers: dict[str, str], limit: int
) -> list[Any]:
    seen: list[Any] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await web.get(path, params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert len(body["items"]) <= limit
        seen.extend(body["items"])
        pages += 1
        cursor = body["next"]
        if cursor is None:
            return seen
        assert pages < 1000


async def test_every_page_of_a_list_of_120_once_in_order_whatever_changes_between_pages(
    app: App,
) -> None:
    ann_id, ann = await _token(app, "ann")
    now = app.clock.now()
    async with app.db.session() as s:
        facts = FactRepo(s)
        fact_ids = [(await facts.add(ann_id, f"fact number {i:03d}"))[0].id for i in range(120)]
        contacts = ContactRepo(s)
        for i in range(120):
            await contacts.add(ann_id, f"{'ABCDEFGH'[i % 8]}person {i:03d}")
        reminders = ReminderRepo(s)
        for i in range(120):
            # Two reminders share each minute: the id decides between them.
            due = now + timedelta(minutes=i // 2 + 1)
            await reminders.add(Reminder(user_id=ann_id, text=f"r{i}", next_at=due))
    async with client_for(app) as web:
        walked = await _walk(web, "/api/v1/facts", ann, 50)
        assert [f["id"] for f in walked] == fact_ids  # all 120, oldest first, once each
        names = [c["name"] for c in await _walk(web, "/api/v1/contacts", ann, 7)]
        assert len(names) == 120 and len(set(names)) == 120
        assert names == sorted(names, key=str.casefold)
        soon = await _walk(web, "/api/v1/reminders", ann, 13)
        assert len({r["id"] for r in soon}) == 120
        assert [r["next_at"] for r in soon] == sorted(r["next_at"] for r in soon)

        # Between two pages one fact already given is forgotten and a new one is added:
        # the next page starts right after the last fact given, none twice, none skipped.
        first = (await web.get("/api/v1/facts", params={"limit": 50}, headers=ann)).json()
        gone = await web.delete(f"/api/v1/facts/{fact_ids[10]}", headers=ann)
        assert gone.status_code == 204
        async with app.db.session() as s:
            new, _ = await FactRepo(s).add(ann_id, "a new fact at the end")
        rest = await _walk_from(web, "/api/v1/facts", ann, 50, first["next"])
        assert [f["id"] for f in rest] == [*fact_ids[50:], new.id]


async def test_the_events_of_a_busy_calendar_are_all_listed_not_the_first_200(app: App) -> None:
    # Four events a day from a linked work calendar: 240 in the two months the list covers.
    # The read under the list stopped at 200, so the last page said "no more" (next: null)
    # and the 40 latest events were missing: a list cut without a word.
    ann_id, ann = await _token(app, "ann")
    now = app.clock.now()
    busy = [
        OutsideEvent(
            f"standup-{i}@work", f"meeting {i:03d}", at, at + timedelta(minutes=30), False, None
        )
        for i in range(240)
        for at in [now + timedelta(days=i // 4, hours=1 + 2 * (i % 4))]
    ]
    async with app.db.session() as s:
        await CalendarRepo(s).sync_outside(ann_id, "ics:1", busy, now, remove_missing=False)
    async with client_for(app) as web:
        walked = await _walk(web, "/api/v1/events", ann, 100)
    assert [e["title"] for e in walked] == [e.title for e in busy]


async def _walk_from(
    web: httpx.AsyncClient, path: str, headers: dict[str, str], limit: int, cursor: str
) -> list[Any]:
    seen: list[Any] = []
    next_cursor: str | None = cursor
    while next_cursor is not None:
        answer = await web.get(
            path, params={"limit": limit, "cursor": next_cursor}, headers=headers
        )
        body = answer.json()
        seen.extend(body["items"])
        next_cursor = body["next"]
    return seen


async def test_a_forged_stale_or_foreign_cursor_and_a_limit_too_high_are_refused(
    app: App,
) -> None:
    ann_id, ann = await _token(app, "ann")
    _, bob = await _token(app, "bob")
    async with app.db.session() as s:
        for i in range(5):
            await FactRepo(s).add(ann_id, f"fact {i}")
            await ContactRepo(s).add(ann_id, f"contact {i}")
    async with client_for(app) as web:
        page = (await web.get("/api/v1/facts", params={"limit": 2}, headers=ann)).json()
        cursor = page["next"]
        assert cursor
        body, mac = cursor.split(".")
        forged = ("A" if body[0] != "A" else "B") + body[1:] + "." + mac
        stale = await make_cursor(
            app.web.auth.seal, "facts", ann_id, Position((2,), 0), issued=time.time() - 2 * 86400
        )
        refusals = {
            "changed": await web.get("/api/v1/facts", params={"cursor": forged}, headers=ann),
            "garbage": await web.get("/api/v1/facts", params={"cursor": "nonsense"}, headers=ann),
            "another list": await web.get(
                "/api/v1/contacts", params={"cursor": cursor}, headers=ann
            ),
            "another user": await web.get("/api/v1/facts", params={"cursor": cursor}, headers=bob),
            "a day old": await web.get("/api/v1/facts", params={"cursor": stale}, headers=ann),
        }
        for why, answer in refusals.items():
            detail = _is_problem(answer, 400)["detail"]
            assert "Start again from the first page" in detail, why
        assert "more than a day old" in _is_problem(refusals["a day old"], 400)["detail"]
        # The genuine cursor still works after all that.
        rest = await web.get("/api/v1/facts", params={"cursor": cursor}, headers=ann)
        assert rest.status_code == 200 and len(rest.json()["items"]) == 3

        too_many = await web.get("/api/v1/facts", params={"limit": MAX_LIMIT + 1}, headers=ann)
        problem = _is_problem(too_many, 422)
        assert problem["errors"][0]["name"] == "limit"
        assert str(MAX_LIMIT) in problem["detail"]
        search = await web.get(
            "/api/v1/memory/search", params={"q": "fact", "limit": 51}, headers=ann
        )
        assert "50" in _is_problem(search, 422)["detail"]  # was silently cut to 50
        assert _is_problem(await web.get("/api/v1/facts", params={"limit": 0}, headers=ann), 422)


async def test_status_codes_say_what_happened_in_one_error_shape(app: App) -> None:
    _, ann = await _token(app, "ann")
    _, bob = await _token(app, "bob")
    async with client_for(app) as web:
        made = await web.post("/api/v1/facts", json={"text": "I was born in Porto"}, headers=ann)
        assert made.status_code == 201, made.text
        fact = made.json()
        assert fact["id"] > 0 and fact["action"] == "added"
        again = await web.post("/api/v1/facts", json={"text": "I was born in Porto"}, headers=ann)
        assert again.status_code == 200  # nothing new was stored
        assert again.json()["id"] == fact["id"] and again.json()["action"] == "known"
        short = await web.post("/api/v1/facts", json={"text": "ab"}, headers=ann)
        assert "3 characters to 40 words" in _is_problem(short, 422)["detail"]

        device = await web.post("/api/v1/devices", json={"text": "kitchen"}, headers=ann)
        assert device.status_code == 201 and device.json()["id"] > 0
        twice = await web.post("/api/v1/devices", json={"text": "kitchen"}, headers=bob)
        assert "already exists" in _is_problem(twice, 409)["detail"]  # was 422
        assert "bob" not in twice.text.lower()

        rui = await web.post("/api/v1/contacts", json={"name": "Rui"}, headers=ann)
        assert rui.status_code == 201 and rui.json()["id"] > 0
        updated = await web.post(
            "/api/v1/contacts", json={"name": "Rui", "reach": "rui@example.test"}, headers=ann
        )
        assert updated.status_code == 200  # the same contact, updated (was 201)
        assert updated.json()["id"] == rui.json()["id"]
        ana = await web.post("/api/v1/contacts", json={"name": "Ana"}, headers=ann)
        clash = await web.patch(
            f"/api/v1/contacts/{ana.json()['id']}", json={"name": "Rui"}, headers=ann
        )
        _is_problem(clash, 409)

        invalid = await web.post("/api/v1/facts", json={"words": "no text"}, headers=ann)
        problem = _is_problem(invalid, 422)  # FastAPI's own validation, in the same shape
        assert {"in": "body", "name": "text", "problem": "Field required"} in problem["errors"]
        assert [e["name"] for e in problem["errors"]] == ["text", "words"]  # words: unknown
        nobody = await web.get("/api/v1/facts")
        assert "Bearer" in _is_problem(nobody, 401)["detail"]
        assert nobody.headers["www-authenticate"] == "Bearer"
        missing = await web.delete("/api/v1/facts/999999", headers=ann)
        _is_problem(missing, 404)
        _, look = await _token(app, "carla", write=False)
        _is_problem(await web.post("/api/v1/facts", json={"text": "x y z"}, headers=look), 403)
