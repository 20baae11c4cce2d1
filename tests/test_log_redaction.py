"""Log redaction built from the declared secrets (issue 28): a contract test of the registry.

Every secret a feature declares (a setting's value, or a shape with its example) is logged
through lifebot's loggers and the libraries' (uvicorn's, APScheduler's, httpx's,
python-telegram-bot's), at DEBUG, in a message, a traceback and an ``extra=`` field, and must
be absent from the log file and from any other handler's records. A real ``lifebot serve`` at
DEBUG then uses the run-time secrets the way people do (a sign-in link, a location token, a
subscribed feed's secret address, the private calendar feed) and its log file is searched.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app import logsafe
from bot.app.features import REGISTRY
from bot.app.logs import NOISY, setup_logging
from bot.web.server import WebServer
from tests.fakes.ics_feed import FakeFeed
from tests.fakes.telegram_api import TOKEN, FakeTelegram
from tests.support.app import AppFactory, make_settings
from tests.support.calendars import ics_body
from tests.support.env import process_env
from tests.support.serve import free_port, spawn_serve
from tests.support.telegram import CHAT
from tests.support.web import login_form

LOGGERS = ("bot.somewhere", "uvicorn.error", "apscheduler.scheduler", "httpx", "telegram.ext")


def _shaped() -> Iterator[tuple[str, str, str]]:
    """(name, a line holding it, the part that must not be logged) of every declared shape."""
    for secret in REGISTRY.secrets():
        pattern = secret.pattern()
        if pattern is None:
            continue
        assert secret.example, f"{secret.name}: a shape needs an example for this test"
        found = pattern.search(secret.example)
        assert found is not None, f"{secret.name}: its example does not have its shape"
        kept = found.group(1) if pattern.groups and found.group(1) else ""
        yield secret.name, secret.example, found.group(0)[len(kept) :]


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """Put the test process's logging back as it was after ``setup_logging``."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in (*NOISY, *LOGGERS)}
    factory = logging.getLogRecordFactory()
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)
    logging.setLogRecordFactory(factory)


def _fail(line: str) -> None:
    raise RuntimeError(f"could not use {line}")


class Kept(logging.Handler):
    """A handler someone else added (as a library or pytest would): it keeps its records."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(message)s").format(record))


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.usefixtures("restored_logging")
def test_every_declared_secret_is_absent_from_every_logger_at_debug(
    tmp_path: Path, log_format: str
) -> None:
    values: dict[str, Any] = {
        s.setting: "Sx" + secrets.token_urlsafe(24) for s in REGISTRY.secrets() if s.setting
    }
    log_file = tmp_path / "lifebot.log"
    settings = make_settings(
        tmp_path, log_level="DEBUG", log_file=log_file, log_format=log_format, **values
    )
    setup_logging(settings)
    theirs = Kept()
    logging.getLogger("uvicorn.error").addHandler(theirs)
    cases = [(f"setting {k}", f"using {v} now", v) for k, v in values.items()]
    cases += list(_shaped())
    for _name, line, _hidden in cases:
        for name in LOGGERS:
            logging.getLogger(name).debug("sending %s", line)
        logging.getLogger("bot.somewhere").info("a field", extra={"target": line})
        try:
            _fail(line)
        except RuntimeError:
            logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    logging.getLogger("uvicorn.error").removeHandler(theirs)
    for handler in logging.getLogger().handlers:
        handler.flush()

    written = log_file.read_text()
    for where, text in (("the log file", written), ("another handler", "\n".join(theirs.lines))):
        leaked = [name for name, _line, hidden in cases if hidden in text]
        assert not leaked, f"in {where}: {leaked}"
    assert written.count(logsafe.REDACTED) >= len(cases) * (len(LOGGERS) + 1)
    for name in LOGGERS:
        assert name in written  # every library's lines reach lifebot's file
    assert "Traceback" in written and "RuntimeError: could not use" in written


def test_a_shape_keeps_its_prefix_so_a_reader_knows_what_was_hidden() -> None:
    redactor = logsafe.redactor_for(None)
    assert redactor.clean("token lbl_abcdefghijkl ok") == "token lbl_[redacted] ok"
    assert redactor.clean("postgresql://u:pw-secret@db/x") == "postgresql://u:[redacted]@db/x"
    assert redactor.clean("nothing secret here") == "nothing secret here"


def _env(tmp_path: Path, tg: FakeTelegram, web_port: int, **extra: str) -> dict[str, str]:
    return process_env(
        tmp_path,
        LIFEBOT_LOG_FILE=str(tmp_path / "lifebot.log"),
        LIFEBOT_LOG_LEVEL="DEBUG",
        LIFEBOT_JOBS_ENABLED="false",
        LIFEBOT_WEB_HOST="127.0.0.1",
        LIFEBOT_WEB_PORT=str(web_port),
        LIFEBOT_WEB_PUBLIC_URL=f"http://127.0.0.1:{web_port}",
        LIFEBOT_ALLOWLIST=f"telegram:{CHAT}",
        LIFEBOT_CALENDAR_ALLOW_PRIVATE="true",  # the fake feed is on this machine
        TELEGRAM_BOT_TOKEN=TOKEN,
        LIFEBOT_TELEGRAM_API_URL=tg.api_url,
        LIFEBOT_TELEGRAM_POLL_TIMEOUT="1",
        **extra,
    )


async def _reply(tg: FakeTelegram, text: str, pattern: str) -> str:
    """Send ``text`` as the user; the first match of ``pattern`` in lifebot's answers."""
    before = len(tg.texts(CHAT))
    await tg.send_text(CHAT, text)
    async with asyncio.timeout(60):
        while True:
            for said in tg.texts(CHAT)[before:]:
                if found := re.search(pattern, said):
                    return found.group(0)
            await asyncio.sleep(0.1)


async def test_secrets_used_through_a_real_serve_never_reach_its_debug_log(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    feed = FakeFeed(ics_body(("u1", "20300101T090000", "Dentist")))
    feed_secret = "priv" + secrets.token_hex(12)
    await feed.start()
    web_port = free_port()
    proc = spawn_serve(tmp_path, _env(tmp_path, tg, web_port, OPENAI_API_KEY="sk-" + "k" * 40))
    base = f"http://127.0.0.1:{web_port}"
    try:
        link = await _reply(tg, "/web", rf"{re.escape(base)}/login/[\w-]+")
        await _reply(tg, "/location on", r"\S+")
        token = await _reply(tg, "/location token", r"lbl_[\w-]+")
        feed_url = f"{feed.url}?key={feed_secret}"
        await _reply(tg, f"/calendar add {feed_url}", r"\S+")
        async with httpx.AsyncClient(base_url=base, timeout=30) as web:
            secret = link.rsplit("/", 1)[1]
            signed = await web.post("/login", data=await login_form(web, secret))
            assert signed.status_code == 303, signed.text
            page = await web.get("/calendar")
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None, page.text[:500]
            shown = await web.post("/calendar/feed", data={"csrf": csrf.group(1)})
            own = re.search(r"/calendar/([\w-]+)\.ics", shown.text)
            assert own is not None, shown.text[:500]
            assert (await web.get(f"/calendar/{own.group(1)}.ics")).status_code == 200
            point = {
                "locations": [
                    {
                        "type": "Feature",
                        "geometry": {"type": "Point", "coordinates": [13.4, 52.5]},
                        "properties": {"timestamp": "2026-01-01T10:00:00Z"},
                    }
                ]
            }
            sent = await web.post(
                "/api/location/overland", json=point, headers={"Authorization": f"Bearer {token}"}
            )
            assert sent.status_code in (200, 400), sent.text  # stored, or refused by date
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 30)
        await feed.stop()

    log = (tmp_path / "lifebot.log").read_text() + (tmp_path / "serve.log").read_text()
    assert " DEBUG " in log  # the libraries did log at DEBUG...
    assert "uvicorn.error" in log  # ...uvicorn's lines included, in lifebot's file
    hidden = {
        "sign-in link": link.rsplit("/", 1)[1],
        "location token": token.removeprefix("lbl_"),
        "subscribed feed's secret": feed_secret,
        "private calendar feed": own.group(1),
        "Telegram token": TOKEN.split(":")[1],
        "language model key": "k" * 40,
    }
    leaked = {what: _around(log, value) for what, value in hidden.items() if value in log}
    assert not leaked, leaked
    assert logsafe.REDACTED in log


def _around(text: str, value: str) -> str:
    i = text.index(value)
    return text[max(0, i - 150) : i + 60]


@pytest.mark.usefixtures("restored_logging")
async def test_the_web_servers_own_500_lands_in_lifebots_log_redacted(
    app_factory: AppFactory, tmp_path: Path
) -> None:
    """uvicorn logs an unexpected error itself: through lifebot's handler, without the token."""
    log_file = tmp_path / "lifebot.log"
    application = await app_factory(log_file=log_file, log_level="INFO")
    setup_logging(application.settings)
    token = "lbl_" + secrets.token_urlsafe(24)

    async def boom() -> None:  # a route that fails the way a bug would, holding a secret
        raise RuntimeError(f"could not use {token}")

    application.web.app.add_api_route("/api/v1/boom", boom)
    server = WebServer(application.web.app, "127.0.0.1", 0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.bound_port}") as web:
            failed = await web.get("/api/v1/boom")
            assert failed.status_code == 500
            assert failed.headers["content-type"] == "application/problem+json"
            assert token not in failed.text and "Traceback" not in failed.text
            assert (await web.get("/healthz")).status_code == 200  # and it keeps answering
    finally:
        await server.stop()
    for handler in logging.getLogger().handlers:
        handler.flush()
    written = log_file.read_text()
    assert "uvicorn.error: Exception in ASGI application" in written
    assert "RuntimeError: could not use lbl_[redacted]" in written
    assert token.removeprefix("lbl_") not in written
