"""Requests arriving together: what each answers is what it would answer alone.

Fired at once through the real app over a real socket (uvicorn in the test's loop), on SQLite
and on PostgreSQL: none may answer 500 ("database is locked", a unique key violated) and none
may store twice what the same requests one after another store once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from bot.app.build import App
from bot.web.server import WebServer
from storage.db import Database
from storage.repos.calendar import CalendarRepo
from tests.fakes.ics_feed import FakeFeed
from tests.support.app import add_user


async def test_a_failed_first_write_leaves_sqlite_writable_for_everyone_else(
    tmp_path: Path,
) -> None:
    """A unit of work whose first write breaks a unique key must give the write lock back.

    SQLite opens the transaction (and takes the one writer's lock) before the statement
    fails; the one-trip driver did not notice, skipped the rollback and pooled the connection
    still holding the lock: every other writer (another request, ``lifebot`` on the command
    line) waited its 15 s and got "database is locked".
    """
    path = tmp_path / "x.db"
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        async with db.session() as s:
            await (await s.connection()).execute(text("CREATE TABLE t (k TEXT PRIMARY KEY)"))
            await (await s.connection()).execute(text("INSERT INTO t VALUES ('a')"))
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                await (await s.connection()).execute(text("INSERT INTO t VALUES ('a')"))
        other = sqlite3.connect(path, timeout=2)  # another process, as the CLI beside serve
        try:
            other.execute("INSERT INTO t VALUES ('b')")
            other.commit()
        finally:
            other.close()
        async with db.session() as s:  # and the pooled connection carries on cleanly
            await (await s.connection()).execute(text("INSERT INTO t VALUES ('c')"))
        async with db.session() as s:
            rows = (await (await s.connection()).execute(text("SELECT k FROM t ORDER BY k"))).all()
        assert [r[0] for r in rows] == ["a", "b", "c"]
    finally:
        await db.dispose()


TOGETHER = 15
"""Requests fired at once: enough that several read "not there yet" before one inserts."""


@asynccontextmanager
async def _served(application: App) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """The app on a real socket, a client of it and a write token's header for user ann."""
    ann = await add_user(application, "ann")
    assert ann.id is not None
    _, token = await application.web.auth.new_api_token(ann.id, "script", "write")
    server = WebServer(application.web.app, "127.0.0.1", 0)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.bound_port}"
        limits = httpx.Limits(max_connections=TOGETHER)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            yield client, {"Authorization": f"Bearer {token}"}
    finally:
        await server.stop()


async def _together(
    client: httpx.AsyncClient, path: str, body: dict[str, str], api: dict[str, str]
) -> list[httpx.Response]:
    """``TOGETHER`` identical POSTs at once."""
    return await asyncio.gather(
        *(client.post(path, json=body, headers=api) for _ in range(TOGETHER))
    )


def _codes(answers: list[httpx.Response]) -> list[int]:
    return sorted(r.status_code for r in answers)


async def test_one_pendant_name_posted_at_once_is_one_201_and_plain_409s(any_db_app: App) -> None:
    names = ["pendant", "clip", "badge"]
    async with _served(any_db_app) as (client, api):
        for name in names:
            answers = await _together(client, "/api/v1/devices", {"text": name}, api)
            assert _codes(answers) == [201] + [409] * (TOGETHER - 1), [r.text for r in answers]
            assert all(name in r.json()["detail"] for r in answers if r.status_code == 409)
        listed = (await client.get("/api/v1/devices", headers=api)).json()["items"]
        assert sorted(d["name"] for d in listed) == sorted(names)
        # A revoked name taken back by several at once: one gets it, with a token that works.
        gone = next(d for d in listed if d["name"] == "clip")
        assert (
            await client.delete(f"/api/v1/devices/{gone['id']}", headers=api)
        ).status_code == 204
        answers = await _together(client, "/api/v1/devices", {"text": "clip"}, api)
        assert _codes(answers) == [201] + [409] * (TOGETHER - 1), [r.text for r in answers]
        [won] = [r.json()["token"] for r in answers if r.status_code == 201]
        assert await any_db_app.web.service.devices.registry.authenticate(won) is not None


async def test_one_contact_posted_at_once_is_made_once(any_db_app: App) -> None:
    names = ["Rui", "Ana", "Ben"]
    async with _served(any_db_app) as (client, api):
        for name in names:
            body = {"name": name, "reach": f"{name}@example.org"}
            answers = await _together(client, "/api/v1/contacts", body, api)
            assert _codes(answers) == [200] * (TOGETHER - 1) + [201], [r.text for r in answers]
            assert len({r.json()["id"] for r in answers}) == 1
        listed = (await client.get("/api/v1/contacts", headers=api)).json()["items"]
        assert [c["name"] for c in listed] == sorted(names)
        assert all(c["reach"] == f"{c['name']}@example.org" for c in listed)


@pytest.mark.parametrize(
    ("spellings", "renames"),
    [
        pytest.param(["Anna", "anna", "ANNA", "aNNa", "AnnA"], ("Zed", "zed"), id="ascii"),
        # SQLite's lower() folds only ASCII, so its unique (user, lower(name)) let both
        # inserts pass there; an accent typed as a separate mark is the same name too.
        pytest.param(
            ["Ângela", "ângela", "ÂNGELA", "A\u0302ngela", "a\u0302NGELA"],
            ("élodie", "Élodie"),
            id="accented",
        ),
    ],
)
async def test_one_contact_posted_at_once_in_different_cases_is_made_once(
    any_db_app: App, spellings: list[str], renames: tuple[str, str]
) -> None:
    """Anna and anna (Ângela and ângela) are one person to every lookup: posted together,
    one contact.

    The unique name was case-sensitive, so both inserts passed and the person was stored
    twice; every later "Anna" then fitted two contacts. As one after the other: one 201,
    the rest update it (200), and it keeps the first spelling.
    """
    async with _served(any_db_app) as (client, api):
        answers = await asyncio.gather(
            *(
                client.post("/api/v1/contacts", json={"name": name}, headers=api)
                for name in spellings * (TOGETHER // len(spellings))
            )
        )
        assert _codes(answers) == [200] * (TOGETHER - 1) + [201], [r.text for r in answers]
        assert len({r.json()["id"] for r in answers}) == 1
        listed = (await client.get("/api/v1/contacts", headers=api)).json()["items"]
        assert len(listed) == 1 and listed[0]["name"] in spellings, listed
        # Renames to one name in different cases: one gets it, the rest a plain 409.
        ids = [
            (await client.post("/api/v1/contacts", json={"name": f"c{n}"}, headers=api)).json()
            for n in range(TOGETHER)
        ]
        answers = await asyncio.gather(
            *(
                client.patch(
                    f"/api/v1/contacts/{c['id']}", json={"name": renames[n % 2]}, headers=api
                )
                for n, c in enumerate(ids)
            )
        )
        assert _codes(answers) == [200] + [409] * (TOGETHER - 1), [r.text for r in answers]
        listed = (await client.get("/api/v1/contacts", headers=api)).json()["items"]
        assert [x["name"].lower() for x in listed].count(renames[0].lower()) == 1


async def test_renames_to_one_name_at_once_are_one_200_and_plain_409s(any_db_app: App) -> None:
    """Contacts and places renamed together to one free name: one gets it, the rest 409."""
    async with _served(any_db_app) as (client, api):
        ann = (await client.get("/api/v1/me", headers=api)).json()["id"]
        contacts = [
            (await client.post("/api/v1/contacts", json={"name": f"c{n}"}, headers=api)).json()
            for n in range(TOGETHER)
        ]
        places = [
            await any_db_app.location.add_place(ann, f"p{n}", 41.1 + n / 100, -8.6)
            for n in range(TOGETHER)
        ]
        for path, ids in (
            ("/api/v1/contacts", [c["id"] for c in contacts]),
            ("/api/v1/places", [p.id for p in places]),
        ):
            answers = await asyncio.gather(
                *(client.patch(f"{path}/{i}", json={"name": "Zed"}, headers=api) for i in ids)
            )
            assert _codes(answers) == [200] + [409] * (TOGETHER - 1), [r.text for r in answers]
            assert all("Zed" in r.json()["detail"] for r in answers if r.status_code == 409)
            listed = (await client.get(path, headers=api)).json()["items"]
            assert [x["name"] for x in listed].count("Zed") == 1


async def test_one_fact_posted_at_once_is_stored_once(any_db_app: App) -> None:
    """As one after the other: one 201, then 200 ``known`` with the same id."""
    async with _served(any_db_app) as (client, api):
        for words in ("I live in Porto", "My sister is Ana", "I am allergic to cats"):
            answers = await _together(client, "/api/v1/facts", {"text": words}, api)
            assert _codes(answers) == [200] * (TOGETHER - 1) + [201], [r.text for r in answers]
            assert len({r.json()["id"] for r in answers}) == 1
            assert {r.json()["action"] for r in answers if r.status_code == 200} == {"known"}
        listed = (await client.get("/api/v1/facts", headers=api)).json()["items"]
        assert sorted(f["text"] for f in listed) == sorted(
            ["I live in Porto", "My sister is Ana", "I am allergic to cats"]
        )


def _calendar() -> bytes:
    """An ICS feed of one event tomorrow (within the window a feed is read over)."""
    start = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y%m%dT090000Z")
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:standup@t\r\nDTSTAMP:20250101T000000Z\r\nDTSTART:{start}\r\nDURATION:PT1H\r\n"
        "SUMMARY:Standup\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    ).encode()


async def test_one_feed_subscribed_at_once_is_one_calendar(any_db_app: App) -> None:
    """As one after the other: one 201, then 200 with that calendar; its events once.

    Every copy was a calendar of its own, fetched and stored on each refresh, so each of the
    feed's events showed once per copy.
    """
    feed = FakeFeed(_calendar())
    url = await feed.start()
    calendars = any_db_app.jobs.calendars
    calendars.settings = replace(calendars.settings, allow_private=True)  # the feed's loopback
    try:
        async with _served(any_db_app) as (client, api):
            together = 5  # each first read is a bounded child process: few, on two cores
            answers = await asyncio.gather(
                *(
                    client.post("/api/v1/calendars", json={"url": url}, headers=api)
                    for _ in range(together)
                )
            )
            assert _codes(answers) == [200] * (together - 1) + [201], [r.text for r in answers]
            assert len({r.json()["id"] for r in answers}) == 1
            listed = (await client.get("/api/v1/calendars", headers=api)).json()["items"]
            assert len(listed) == 1
            ann = (await client.get("/api/v1/me", headers=api)).json()["id"]
        async with any_db_app.db.session() as s:
            events = await CalendarRepo(s).all_events(ann)
        assert [e.title for e in events] == ["Standup"]
    finally:
        await feed.stop()
