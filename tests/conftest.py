"""Shared fixtures: a network-off guard, clean settings, a temp database, the fake LLM and
the fake Slack. Plain helpers live in tests/support/ (no test module imports another)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.build import App, build_app, start_app, start_channels
from bot.clock import Clock
from bot.config import normalise_database_url
from bot.speech.transcribe import Transcriber
from storage.db import Database
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM
from tests.fakes.scripted_llm import ScriptedLLM
from tests.fakes.slack_api import TEAM_ID, FakeSlack
from tests.fakes.telegram_api import BOT_ID, TOKEN, FakeTelegram
from tests.support.app import (
    AppFactory,
    add_user,
    make_settings,
    migrated_sqlite_url,
    with_schema,
)
from tests.support.slack import ANA, Slack, manifest, start_slack
from tests.support.telegram import CHAT, Starter

POSTGRES_URL = os.environ.get("LIFEBOT_TEST_POSTGRES_URL")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise AssertionError(f"test tried to reach the real network: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise AssertionError(f"test tried to reach the real network: {address!r}")
    return _real_connect_ex(self, address)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (half a minute of several processes) run first.

    pytest-xdist hands tests to the two workers in this order: one started last kept one
    worker busy alone at the end of the run while the other had nothing left to do.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _network_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that opens a connection beyond loopback."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never see the developer's credentials or .env."""
    for name in list(os.environ):
        if name.startswith(("LIFEBOT_", "OPENAI_", "TELEGRAM_", "SLACK_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A started loopback OpenAI-compatible server; unscripted or unused steps fail the test."""
    server = FakeLLM()
    await server.start()
    yield server
    await server.stop()
    server.check()


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """An in-process fake of the LLM port; unscripted or unused steps fail the test."""
    llm = ScriptedLLM()
    yield llm
    llm.check()


@pytest.fixture
async def app_factory(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[AppFactory]:
    """Build started apps (migrated database); all are closed after the test.

    Depends on ``fake_llm`` so the fake model outlives the apps: a model call still running
    when the test ends (a background job's) is answered, not retried against a closed port
    until the app's stop grace runs out.
    """
    apps: list[App] = []

    async def factory(
        llm: FakeLLM | None = None,
        *,
        transcriber: Transcriber | None = None,
        clock: Clock | None = None,
        **overrides: Any,
    ) -> App:
        settings = with_schema(make_settings(tmp_path, llm, **overrides))
        application = build_app(settings, clock=clock, transcriber=transcriber)
        await start_app(application)
        apps.append(application)
        return application

    yield factory
    for application in apps:
        await application.close()


def _run_apart(coro: Any) -> Any:
    """Run a coroutine on its own loop in a worker thread (usable from sync fixtures)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _pg_admin(sql: str) -> None:
    import asyncpg

    assert POSTGRES_URL is not None
    conn = await asyncpg.connect(POSTGRES_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL database (async URL) on the server named by
    LIFEBOT_TEST_POSTGRES_URL; the test is skipped when that variable is unset (.ci/run sets it).
    """
    if not POSTGRES_URL:
        pytest.skip("LIFEBOT_TEST_POSTGRES_URL is not set")
    name = f"lifebot_t_{uuid.uuid4().hex[:12]}"
    _run_apart(_pg_admin(f'CREATE DATABASE "{name}"'))
    base = normalise_database_url(POSTGRES_URL).rsplit("/", 1)[0]
    yield f"{base}/{name}"
    _run_apart(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def _migrated_postgres_template() -> Iterator[str]:
    """A PostgreSQL database at the newest schema, made once per test process, to clone.

    Migrating an empty database takes about 1.5 s (Alembic, dozens of revisions); cloning a
    migrated one (``CREATE DATABASE ... TEMPLATE``) about 0.3 s. The upgrade path itself is
    what the migration tests run on ``postgres_url`` (empty) and ``postgres_or_sqlite_url``.
    """
    if not POSTGRES_URL:
        pytest.skip("LIFEBOT_TEST_POSTGRES_URL is not set")
    name = f"lifebot_tmpl_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:8]}"
    _run_apart(_pg_admin(f'CREATE DATABASE "{name}"'))
    base = normalise_database_url(POSTGRES_URL).rsplit("/", 1)[0]

    async def migrate() -> None:
        db = Database(f"{base}/{name}")
        try:
            await db.migrate()
        finally:
            await db.dispose()  # a template must have no open connection to be cloned

    _run_apart(migrate())
    yield name
    _run_apart(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def migrated_postgres_url(_migrated_postgres_template: str) -> Iterator[str]:
    """A throwaway PostgreSQL database already at the newest schema (a clone of a template)."""
    assert POSTGRES_URL is not None
    name = f"lifebot_t_{uuid.uuid4().hex[:12]}"
    clone = f'CREATE DATABASE "{name}" TEMPLATE "{_migrated_postgres_template}"'
    for attempt in range(3):
        try:
            _run_apart(_pg_admin(clone))
            break
        except Exception as exc:  # "being accessed by other users": a backend still leaving
            if "accessed by other users" not in str(exc) or attempt == 2:
                raise
            time.sleep(0.5)
    base = normalise_database_url(POSTGRES_URL).rsplit("/", 1)[0]
    yield f"{base}/{name}"
    _run_apart(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def another_postgres_url(postgres_url: str) -> Iterator[str]:
    """A second throwaway PostgreSQL database beside ``postgres_url`` (a restore's target)."""
    name = f"lifebot_t_{uuid.uuid4().hex[:12]}"
    _run_apart(_pg_admin(f'CREATE DATABASE "{name}"'))
    yield f"{postgres_url.rsplit('/', 1)[0]}/{name}"
    _run_apart(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgres"])
def postgres_or_sqlite_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database URL: a SQLite file, then a throwaway PostgreSQL database."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite+aiosqlite:///{tmp_path / 'upgrade.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def app_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL for an app, at the newest schema: SQLite, then a PostgreSQL clone."""
    if request.param == "postgres":
        return str(request.getfixturevalue("migrated_postgres_url"))
    return migrated_sqlite_url(tmp_path / "app.db")


@pytest.fixture(params=["sqlite", "postgres"])
async def any_db_app(
    request: pytest.FixtureRequest, app_factory: AppFactory, fake_llm: FakeLLM
) -> App:
    """The ``app`` fixture on SQLite and again on PostgreSQL (skipped when unavailable)."""
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["database_url_setting"] = request.getfixturevalue("migrated_postgres_url")
    application = await app_factory(fake_llm, **overrides)
    application.dispatcher.register(RecordingChannel("fake"))
    return application


@pytest.fixture
async def app(app_factory: AppFactory, fake_llm: FakeLLM) -> App:
    """A started app wired to the fake LLM, with a recording channel named ``fake``."""
    application = await app_factory(fake_llm)
    application.dispatcher.register(RecordingChannel("fake"))
    return application


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    """A started fake Slack granting exactly the manifest's scopes and events."""
    spec = manifest()
    fake = FakeSlack(
        users={ANA: "Ana Lima"},
        # The app-level token's scope is granted outside the manifest.
        scopes={*spec["oauth_config"]["scopes"]["bot"], "connections:write"},
        events=set(spec["settings"]["event_subscriptions"]["bot_events"]),
    )
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    server = FakeTelegram()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def telegram(
    tg: FakeTelegram, app_factory: AppFactory, fake_llm: FakeLLM
) -> AsyncIterator[Starter]:
    """Start lifebot with the Telegram channel (through start_channels) and user Ana."""
    apps: list[App] = []

    async def start(**overrides: Any) -> App:
        settings: dict[str, Any] = {
            "telegram_bot_token": TOKEN,
            "telegram_api_url": tg.api_url,
            "telegram_poll_timeout": 1,
            "telegram_retries": 2,
            **overrides,
        }
        app = await app_factory(fake_llm, **settings)
        assert await start_channels(app) == ["telegram"]
        apps.append(app)
        if not apps[:-1]:
            await add_user(app, str(CHAT), channel_name="telegram", account=str(BOT_ID), name="Ana")
        return app

    yield start
    # Stop the channel while the fake server still runs (it is torn down after this fixture).
    for app in apps:
        for adapter in app.started:
            await adapter.stop()


@pytest.fixture
async def http(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> AsyncIterator[Slack]:
    """lifebot in HTTP mode, Ana already paired."""
    slack = await start_slack(app_factory, fake_llm, fake_slack, "http")
    await add_user(slack.app, ANA, channel_name="slack", account=TEAM_ID)
    yield slack
    await slack.adapter.stop()


@pytest.fixture
async def browser(_chromium: Any) -> AsyncIterator[Any]:
    """Headless chromium (Debian's, driven by Playwright), one per browser test module
    (``tests.support.browser._chromium``); every context a test opened is closed after it."""
    yield _chromium
    for context in list(_chromium.contexts):
        await context.close()


@pytest.fixture
async def served(app_factory: AppFactory, fake_llm: FakeLLM) -> tuple[App, str]:
    """An app whose web page listens on a free loopback port (stopped when the app closes)."""
    application = await app_factory(fake_llm, web_port=0)
    await application.web.start()
    return application, f"http://127.0.0.1:{application.web.server.bound_port}"
