"""The request layer over every route of the app (issue 28): a contract test of the registry.

The routes are not listed here: they are read from the built app and their declarations
(``Route.access``, ``Route.max_body``), so a route added tomorrow is swept the same way. Each
route gets the caller its declaration asks for (a session, an API token, a location or device
token), then ids beyond what an id column holds (on SQLite and PostgreSQL), negative and
non-numeric ids, deep JSON, wrong types and bodies over its cap, declared and chunked. Every
answer must be a 4xx in the shared error shape, the process must keep answering, and a
stranger's body must never be read at all.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime
from itertools import product
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import httpx
import pytest
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel

from bot.app.build import App
from bot.feature import Access
from bot.web.auth import WRITE
from bot.web.gate import BODY_METHODS, RequestGate, Rule, Served, served_routes
from bot.web.params import BodyIn
from bot.web.server import WebServer
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user, make_settings
from tests.support.web import sign_in

CHUNK = 64 * 1024
FILE_LIMIT = 40_000
"""image_max_bytes in these tests, so the upload routes' caps stay small."""
BAD_NUMBERS = (str(2**31), str(2**63), str(2**64 + 1), "-1", "0", "abc", "1e400", "9" * 500)
"""2^31 is one past what an id column holds (INTEGER: PostgreSQL stops there, SQLite does not)."""
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


@dataclass
class Callers:
    """What each kind of caller sends, for one signed-in owner."""

    csrf: str
    api_token: str
    location_token: str
    device_token: str
    feed_secret: str
    link_secret: str

    def path(self, rule: Rule, params: dict[str, str] | None = None) -> str:
        """The route's template with every parameter filled: tokens with the real ones, ids
        with one that names nothing (so no sweep deletes what the next one needs)."""
        given = {"token": self.device_token, **(params or {})}
        if rule.served.template.startswith("/calendar/"):
            given.setdefault("secret", self.feed_secret)
        given.setdefault("secret", self.link_secret)
        return re.sub(
            r"\{(\w+)(?::\w+)?\}", lambda m: given.get(m.group(1), "424242"), rule.served.template
        )

    def headers(self, rule: Rule, path: str) -> dict[str, str]:
        """The credentials the route's declared access asks for (cookies ride in the client)."""
        if rule.declared.access is Access.BEARER:
            return {"Authorization": f"Bearer {self.api_token}"}
        if rule.declared.access is Access.HEADER_TOKEN:
            if path.endswith("/owntracks"):
                raw = base64.b64encode(f"ann:{self.location_token}".encode()).decode()
                return {"Authorization": f"Basic {raw}"}
            return {"Authorization": f"Bearer {self.location_token}"}
        return {}


def _rules(application: App) -> list[Rule]:
    gate = application.web.app.middleware_stack
    while gate is not None and not isinstance(gate, RequestGate):
        gate = getattr(gate, "app", None)
    if gate is None:  # the stack is built at the first request
        raise AssertionError("the app has no request layer")
    return [r for r in gate.rules() if not r.served.template.startswith("/static")]


def _methods(rule: Rule) -> list[str]:
    return sorted(rule.served.methods - {"HEAD", "OPTIONS"}) or ["GET"]


def _numeric(annotation: Any) -> bool:
    kinds = {annotation, *get_args(annotation)}
    for kind in list(kinds):
        kinds |= set(get_args(kind))
    return bool(kinds & {int, float, date, datetime})


def _limits(info: Any) -> list[Any]:
    """The constraints on a parameter, also those inside ``RowId | None``."""
    found = list(info.metadata)
    stack = [info.annotation]
    while stack:
        kind = stack.pop()
        if get_origin(kind) is Annotated:
            found.extend(kind.__metadata__)
        stack.extend(get_args(kind))
    return found


def _params(served: Served, where: str) -> Iterator[tuple[str, Any]]:
    """(name, field info) of the route's path, query or body parameters."""
    dependant = getattr(served.route, "dependant", None)
    if dependant is None:
        return
    stack = [dependant]
    while stack:
        d = stack.pop()
        stack.extend(d.dependencies)
        for f in getattr(d, f"{where}_params"):
            yield f.name, f.field_info


@pytest.fixture
async def owner_app(app_factory: AppFactory, fake_llm: FakeLLM) -> App:
    return await app_factory(fake_llm, image_max_bytes=FILE_LIMIT)


@pytest.fixture(params=["sqlite", "postgres"])
async def owner_app_any_db(
    request: pytest.FixtureRequest, app_factory: AppFactory, fake_llm: FakeLLM
) -> App:
    """``owner_app`` on SQLite, then on PostgreSQL (whose INTEGER ids stop at 2^31-1)."""
    overrides: dict[str, Any] = {"image_max_bytes": FILE_LIMIT}
    if request.param == "postgres":
        overrides["database_url_setting"] = request.getfixturevalue("migrated_postgres_url")
    return await app_factory(fake_llm, **overrides)


async def _callers(application: App, client: httpx.AsyncClient) -> Callers:
    ann = await add_user(application, "ann", owner=True)
    assert ann.id is not None
    csrf = await sign_in(application, client, ann)
    _, api_token = await application.web.auth.new_api_token(ann.id, "sweep", WRITE)
    await application.location.set_enabled(ann.id, True)
    location_token = await application.location.new_token(ann.id)
    _, device_token = await application.web.service.devices.add_device(ann, "omi-sweep")
    feed = await application.web.auth.new_ics_url(ann.id)
    link = await application.web.auth.issue_link(ann.id)
    return Callers(
        csrf=csrf,
        api_token=api_token,
        location_token=location_token,
        device_token=device_token,
        feed_secret=feed.rsplit("/", 1)[1].removesuffix(".ics"),
        link_secret=link.rsplit("/", 1)[1],
    )


def test_every_number_and_date_parameter_is_range_checked(tmp_path: Path) -> None:
    from bot.app.build import build_app

    application = build_app(make_settings(tmp_path))
    unchecked = []
    for served in served_routes(application.web.app.routes):
        for where in ("path", "query"):
            for name, info in _params(served, where):
                if not _numeric(info.annotation):
                    continue
                limits = _limits(info)
                low = any(isinstance(m, Ge | Gt) for m in limits)
                high = any(isinstance(m, Le | Lt) for m in limits)
                if not (low and high):
                    unchecked.append(f"{served.template} {where} {name}")
    assert not unchecked, f"numbers parsed without a range (use bot.web.params): {unchecked}"


def test_every_json_body_is_read_by_a_body_in_model(tmp_path: Path) -> None:
    """``BodyIn`` refuses unknown fields and makes texts storable; a plain model would not."""
    from bot.app.build import build_app

    application = build_app(make_settings(tmp_path))
    models = {
        f"{served.template} {name}": info.annotation
        for served in served_routes(application.web.app.routes)
        for name, info in _params(served, "body")
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
    }
    assert len(models) >= 8  # facts, reminders, settings, tokens, contacts, places, ...
    plain = [route for route, model in models.items() if not issubclass(model, BodyIn)]
    assert not plain, f"JSON bodies read by a model that is not a BodyIn: {plain}"


async def test_every_route_answers_bad_numbers_and_deep_json_with_a_4xx_and_keeps_answering(
    owner_app_any_db: App,
) -> None:
    """Over a real socket, through uvicorn: what a client on the network gets."""
    tried, failures = await _sweep(owner_app_any_db, _bad_requests, _judged)
    assert tried > 100
    assert not failures, "\n".join(failures)


BAD_TEXTS = ("a%00b", "%ff%fe%c0%af", "x" * 20_000, "..%2F..%2Fetc%2Fpasswd", "%F0%9F")
"""Already percent-encoded: a NUL, bytes that are not UTF-8, a long text, a path climb, half
an emoji. A text parameter may find nothing, or refuse, but never fail."""


async def test_every_text_parameter_survives_nul_broken_utf8_and_length(
    owner_app_any_db: App,
) -> None:
    """Query and path texts (names, searches, days, kinds) with what no form would send."""
    tried, failures = await _sweep(owner_app_any_db, _bad_texts, _not_failed)
    assert tried > 20
    assert not failures, "\n".join(failures)


Request = tuple[str, str, dict[str, str], bytes | None, dict[str, str]]
"""(what is tried, path with any query, query parameters, body, headers)."""


async def _sweep(
    application: App,
    requests: Callable[[Callers, Rule, str], Iterator[Request]],
    judge: Callable[[Rule, str, str, httpx.Response], list[str]],
) -> tuple[int, list[str]]:
    """Send every route ``requests`` makes for it, over the network; (how many, failures).

    After each route the process must still answer ``/healthz``.
    """
    failures: list[str] = []
    tried = 0
    async with _on_the_network(application) as (client, who):
        for rule in _rules(application):
            for method in _methods(rule):
                for case, path, query, body, headers in requests(who, rule, method):
                    tried += 1
                    r = await client.request(
                        method, path, params=query, content=body, headers=headers
                    )
                    failures.extend(judge(rule, method, case, r))
            health = await client.get("/healthz")
            assert health.status_code == 200, f"stopped answering after {rule.served.template}"
    return tried, failures


def _bad_texts(who: Callers, rule: Rule, method: str) -> Iterator[Request]:
    """Every text parameter of the route (not its tokens) with each of BAD_TEXTS."""
    good = who.path(rule)
    auth = who.headers(rule, good)
    for where in ("query", "path"):
        for name, info in _params(rule.served, where):
            if _numeric(info.annotation) or name in ("token", "secret"):
                continue
            for bad in BAD_TEXTS:
                if where == "query":
                    url = f"{good}{'&' if '?' in good else '?'}{name}={bad}"
                else:
                    url = who.path(rule, {name: bad})
                yield f"{where} {name}={bad[:20]}", url, {}, None, auth


def _not_failed(rule: Rule, method: str, case: str, r: httpx.Response) -> list[str]:
    if r.status_code < 500:
        return []
    return [f"{method} {rule.served.template} ({case}): {r.status_code} {r.text[:200]}"]


@asynccontextmanager
async def _on_the_network(
    application: App,
) -> AsyncIterator[tuple[httpx.AsyncClient, Callers]]:
    """The app served by uvicorn on a free port, a client of it and the owner's credentials."""
    server = WebServer(application.web.app, "127.0.0.1", 0)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.bound_port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            yield client, await _callers(application, client)
    finally:
        await server.stop()


def _bad_requests(who: Callers, rule: Rule, method: str) -> Iterator[Request]:
    """(what, path, query, body, headers) of every bad request this route should refuse."""
    good = who.path(rule)
    auth = who.headers(rule, good)
    for name, info in _params(rule.served, "path"):
        if _numeric(info.annotation):
            for bad in BAD_NUMBERS:
                yield f"path {name}={bad[:20]}", who.path(rule, {name: bad}), {}, None, auth
    for name, info in _params(rule.served, "query"):
        if _numeric(info.annotation):
            for bad in BAD_NUMBERS:
                yield f"query {name}={bad[:20]}", good, {name: bad}, None, auth
    if method in BODY_METHODS - {"DELETE"}:
        as_json = {**auth, "Content-Type": "application/json"}
        yield "deep JSON", good, {}, DEEP_JSON, as_json
        body_params = list(_params(rule.served, "body"))
        if body_params:  # a JSON model: an array where an object belongs
            yield "wrong JSON types", good, {}, b'[1, "x", null, {"text": 5}]', as_json


def _judged(rule: Rule, method: str, case: str, r: httpx.Response) -> list[str]:
    where = f"{method} {rule.served.template} ({case}): {r.status_code}"
    if not 400 <= r.status_code < 500:
        return [f"{where}, not a 4xx: {r.text[:200]}"]
    if r.request.url.path.startswith(("/api/", "/omi/")):
        problem = r.json() if r.headers["content-type"] == "application/problem+json" else {}
        if problem.get("status") != r.status_code or not problem.get("detail"):
            return [f"{where}, not problem details: {r.headers['content-type']} {r.text[:200]}"]
    elif not r.headers["content-type"].startswith("text/html"):
        return [f"{where}, not the error page: {r.headers['content-type']}"]
    return []


class Pulled:
    """A chunked body that counts how much of it the app read."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < self.total:
            self.sent += CHUNK
            yield b"x" * CHUNK


def _in_process(application: App) -> httpx.AsyncClient:
    # In-process, so the test sees exactly how much of each body the app pulled.
    transport = httpx.ASGITransport(app=application.web.app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://lifebot.test")


async def test_every_route_refuses_a_body_over_its_cap_declared_or_chunked(
    owner_app: App,
) -> None:
    failures: list[str] = []
    async with _in_process(owner_app) as client:
        who = await _callers(owner_app, client)
        rules = _rules(owner_app)
        for rule in rules:
            for method in sorted(rule.served.methods & BODY_METHODS):
                path = who.path(rule)
                headers = who.headers(rule, path)
                where = f"{method} {rule.served.template} (cap {rule.max_body})"
                declared = await client.request(
                    method, path, content=b"x" * (rule.max_body + 1), headers=headers
                )
                if declared.status_code != 413:
                    failures.append(f"{where} declared: {declared.status_code}")
                body = Pulled(rule.max_body + 4 * CHUNK)
                chunked = await client.request(method, path, content=body, headers=headers)
                # Read past its cap: refused. A route that reads no body never reads this one.
                if body.sent and not 400 <= chunked.status_code < 500:
                    failures.append(f"{where} chunked: {chunked.status_code} {chunked.text[:80]}")
                if body.sent > rule.max_body + CHUNK:
                    failures.append(f"{where} chunked: read {body.sent} bytes past its cap")
        assert (await client.get("/healthz")).status_code == 200
    assert len([r for r in rules if r.served.methods & BODY_METHODS]) > 30
    assert not failures, "\n".join(failures)


async def test_a_stranger_is_refused_before_a_byte_of_the_body_is_read(owner_app: App) -> None:
    """Every route that needs a caller checks it first: Omi's webhook read 8 MB before."""
    failures = []
    async with _in_process(owner_app) as client:
        who = await _callers(owner_app, client)
    async with _in_process(owner_app) as stranger:  # no cookie
        for rule in _rules(owner_app):
            if rule.declared.access is Access.PUBLIC:
                continue
            for method in sorted(rule.served.methods & BODY_METHODS):
                wrong = {"token": "lbd_not-a-device-token", "secret": "not-a-secret-at-all"}
                headers = {"Authorization": "Bearer lbk_wrong-token-xxxxxxxx"}
                body = Pulled(1_000_000)
                r = await stranger.request(
                    method, who.path(rule, wrong), content=body, headers=headers
                )
                where = f"{method} {rule.served.template}"
                if r.status_code not in (303, 401, 403, 404):
                    failures.append(f"{where}: {r.status_code} {r.text[:100]}")
                if body.sent:
                    failures.append(f"{where}: read {body.sent} bytes of a stranger's body")
    assert not failures, "\n".join(failures)


async def test_every_token_route_that_takes_a_body_is_checked_by_the_request_layer(
    owner_app: App,
) -> None:
    """A token in a path or a header is the route's own; its check must run before the body."""
    async with _in_process(owner_app) as client:
        assert (await client.get("/healthz")).status_code == 200  # builds the middleware stack
    unchecked = [
        f"{sorted(rule.served.methods & BODY_METHODS)} {rule.served.template}"
        for rule in _rules(owner_app)
        if rule.declared.access in (Access.PATH_TOKEN, Access.HEADER_TOKEN)
        and rule.served.methods & BODY_METHODS
        and rule.check is None
    ]
    assert not unchecked, f"add their check to token_checks in bot/web/app.py: {unchecked}"


UNSTORABLE = ("Ana\x00", "Ana \ud83d")
"""A NUL (PostgreSQL's text columns refuse it) and half an emoji (no UTF-8 for it)."""


def _unstorable_body(served: Served, text: str) -> dict[str, Any] | None:
    """A JSON body of the route's model with every text field ``text``; None without one."""
    for _, info in _params(served, "body"):
        model = info.annotation
        fields = getattr(model, "model_fields", None)
        if fields is None:
            return None
        body: dict[str, Any] = {}
        for name, field in fields.items():
            kinds = {field.annotation, *get_args(field.annotation)}
            if str in kinds:
                body[name] = text
            elif any(get_origin(k) is list and get_args(k) == (str,) for k in kinds):
                body[name] = [text]
        return body or None
    return None


async def test_every_json_body_with_a_nul_or_half_an_emoji_is_stored_clean_or_refused(
    owner_app_any_db: App,
) -> None:
    """A token, contact or place named with a NUL was a 500 on PostgreSQL."""
    owner_app = owner_app_any_db
    async with _on_the_network(owner_app) as (client, who):
        failures, tried = [], 0
        for rule in _rules(owner_app):
            for method, text in product(_methods(rule), UNSTORABLE):
                body = _unstorable_body(rule.served, text)
                if body is None or method not in BODY_METHODS:
                    continue
                tried += 1
                path = who.path(rule)
                headers = {**who.headers(rule, path), "Content-Type": "application/json"}
                sent = json.dumps(body).encode()  # ASCII: the half emoji as \\ud83d
                r = await client.request(method, path, content=sent, headers=headers)
                if r.status_code >= 500 or "\\u0000" in r.text or "\\ud83d" in r.text:
                    failures.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
            assert (await client.get("/healthz")).status_code == 200
        assert tried >= 5
        assert not failures, "\n".join(failures)
