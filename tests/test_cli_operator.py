"""Operator tooling: JSON logs with context, quiet HTTP clients, one-line start-up errors,
doctor --json without migrating, jobs retry, .env.example and the deploy files."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import shutil
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml  # type: ignore[import-untyped]  # a dev dependency without stubs
from typer.testing import CliRunner

from bot.app.build import App, build_app, start_app
from bot.app.cli import app as cli
from bot.app.envfile import render
from bot.app.logs import setup_logging
from storage.db import Database, migration_chain
from storage.models import Delivery
from storage.repos.outbox import OutboxRepo, Push
from tests.fakes.llm import FakeLLM, fail, say
from tests.fakes.telegram_api import FakeTelegram
from tests.support.app import make_settings
from tests.support.builders import make_inbound
from tests.support.env import process_env
from tests.support.jobs import make_user

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    levels = {n: logging.getLogger(n).level for n in ("httpx", "openai", "httpcore")}
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)
    for n, lv in levels.items():
        logging.getLogger(n).setLevel(lv)


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.usefixtures("restore_logging")
async def test_json_logs_name_channel_user_conversation_and_turn(
    app: App, fake_llm: FakeLLM
) -> None:
    out = io.StringIO()
    setup_logging(make_settings(Path("."), log_format="json", log_level="INFO"), stream=out)
    await make_user(app, "ana")
    fake_llm.add(fail(500), fail(500), fail(500))  # the model is down for this turn
    result = await app.dispatcher.handle(make_inbound("hello there", sender="ana"))
    assert result.reply is not None

    lines = _json_lines(out.getvalue())
    assert lines, "nothing was logged"
    down = [ln for ln in lines if "LLM unavailable" in str(ln["msg"])]
    assert down, lines
    line = down[0]
    assert line["level"] == "WARNING"
    assert line["channel"] == "fake"
    assert isinstance(line["user"], int)
    assert isinstance(line["conversation"], int)
    assert isinstance(line["turn"], int)
    assert "ts" in line and "logger" in line
    # Every request of the model's HTTP client was at INFO: kept out below WARNING.
    assert not [ln for ln in lines if str(ln["logger"]).startswith(("httpx", "openai"))]


@pytest.mark.usefixtures("restore_logging")
async def test_http_client_lines_only_when_debugging(app: App, fake_llm: FakeLLM) -> None:
    out = io.StringIO()
    setup_logging(make_settings(Path("."), log_format="json", log_level="DEBUG"), stream=out)
    await make_user(app, "ana")
    fake_llm.add(say("Hi!"))
    await app.dispatcher.handle(make_inbound("hello", sender="ana"))
    loggers = {str(ln["logger"]) for ln in _json_lines(out.getvalue())}
    assert {"httpx", "openai._base_client"} & loggers, loggers


@pytest.mark.usefixtures("restore_logging")
def test_plain_logs_carry_the_context_too() -> None:
    from bot import logctx

    out = io.StringIO()
    setup_logging(make_settings(Path("."), log_level="INFO"), stream=out)
    with logctx.bind(channel="telegram", user=7):
        logging.getLogger("lifebot.test").info("hello")
    logging.getLogger("lifebot.test").info("outside")
    first, second = out.getvalue().splitlines()
    assert first.endswith("hello [channel=telegram user=7]")
    assert second.endswith("outside")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lifebot(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = process_env(tmp_path, **env)
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean,
        timeout=90,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_serve_with_the_database_down_says_one_line_and_the_fix(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test"
    proc = _lifebot(tmp_path, "serve", LIFEBOT_DATABASE_URL=url)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("error: could not open or migrate the database at postgresql")
    assert "Fix: start the database server, or correct LIFEBOT_DATABASE_URL" in lines[0]


def test_a_database_upgraded_by_a_newer_lifebot_is_named_not_a_traceback(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "data" / "lifebot.db"

    async def from_the_future() -> None:
        db = Database(f"sqlite+aiosqlite:///{db_path}")
        await db.migrate()
        async with db.engine.begin() as conn:  # as a later release would leave it
            await conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0099_future'")
        await db.dispose()

    asyncio.run(from_the_future())
    for args in (("serve",), ("memory", "search", "--user", "1", "trip")):
        proc = _lifebot(tmp_path, *args)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        [line] = proc.stderr.strip().splitlines()
        assert "schema revision '0099_future', which this lifebot does not know" in line
        assert line.endswith(
            "Fix: run the newer lifebot that upgraded it, or restore a backup "
            "taken before the upgrade"
        )

    result = CliRunner().invoke(
        cli, ["doctor", "--json"], env={"LIFEBOT_DATA_DIR": str(db_path.parent)}
    )
    database = next(c for c in json.loads(result.output)["checks"] if c["name"] == "database")
    assert database["status"] != "ok" and "0099_future" in database["detail"]
    assert "newer lifebot" in database["fix"]


async def test_serve_with_a_bad_telegram_token_says_one_line_and_the_fix(tmp_path: Path) -> None:
    telegram = FakeTelegram()
    await telegram.start()
    try:
        proc = await asyncio.to_thread(
            _lifebot,
            tmp_path,
            "serve",
            TELEGRAM_BOT_TOKEN="123456:WRONG-token-abcdefghijklmnopqrst",
            LIFEBOT_TELEGRAM_API_URL=telegram.api_url,
            LIFEBOT_TELEGRAM_FILE_URL=telegram.file_url,
            LIFEBOT_JOBS_ENABLED="false",
            LIFEBOT_LOG_LEVEL="WARNING",  # the migration's INFO lines are not the point here
            OPENAI_BASE_URL=f"http://127.0.0.1:{_closed_port()}/v1",  # no "no model" warning
        )
    finally:
        await telegram.stop()
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "error: Telegram rejected TELEGRAM_BOT_TOKEN; copy it again from @BotFather"
    ], proc.stderr


def test_serve_says_what_it_started_and_where_even_at_warning(tmp_path: Path) -> None:
    # A pendant channel only (no console): serve must still say it runs, then stop on SIGTERM.
    env = process_env(
        tmp_path,
        LIFEBOT_DEVICE_ENABLED="true",
        LIFEBOT_DEVICE_PORT=str(_closed_port()),
        LIFEBOT_LOG_LEVEL="WARNING",
        LIFEBOT_JOBS_ENABLED="false",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stderr is not None
        seen = []
        while line := proc.stderr.readline():  # until serve says it runs (or exits)
            seen.append(line)
            if line.startswith("lifebot is running"):
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    running = seen[-1] if seen else ""
    assert running.startswith("lifebot is running: pendant (ws://127.0.0.1:"), seen
    assert "scheduled jobs off" in running


def test_serve_with_no_chat_channel_keeps_the_web_page_up_after_its_input_ends(
    tmp_path: Path,
) -> None:
    # As in a container: stdin is /dev/null and no chat channel is configured. The console's
    # input ends at once; the web page (and its webhooks) must stay up until SIGTERM.
    import urllib.request

    port = _closed_port()
    env = process_env(tmp_path, LIFEBOT_WEB_PORT=str(port), LIFEBOT_JOBS_ENABLED="false")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stderr is not None
        seen = []
        while line := proc.stderr.readline():
            seen.append(line)
            if "still serving" in line:
                break
        assert any(f"web page (http://127.0.0.1:{port})" in line for line in seen), seen
        assert proc.poll() is None, seen
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as resp:
            assert json.loads(resp.read()) == {"status": "ok"}
        assert proc.poll() is None  # still running after serving the request
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    # The operator reading the log afterwards sees why it stopped.
    log = (tmp_path / "data" / "lifebot.log").read_text()
    assert "stopping: SIGTERM received" in log, log[-2000:]


def _run(coro_fn: Callable[[App], Awaitable[T]], tmp_path: Path) -> T:
    async def go() -> T:
        application = build_app(make_settings(tmp_path))
        try:
            await start_app(application)
            return await coro_fn(application)
        finally:
            await application.close()

    return asyncio.run(go())


def test_doctor_json_counts_pending_migrations_and_changes_nothing(tmp_path: Path) -> None:
    db_path = tmp_path / "data" / "lifebot.db"
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}

    async def old_schema() -> None:
        db = Database(f"sqlite+aiosqlite:///{db_path}")
        await db.migrate(migration_chain()[-2])  # one migration behind
        await db.dispose()

    asyncio.run(old_schema())
    result = CliRunner().invoke(cli, ["doctor", "--json"], env=env)
    report = json.loads(result.output)
    database = next(c for c in report["checks"] if c["name"] == "database")
    assert database["status"] == "ok"
    assert "1 migration is pending" in database["detail"]
    assert report["ok"] is False  # no language model configured
    assert {c["name"] for c in report["checks"]} >= {"language model", "embedding model"}
    embedding = next(c for c in report["checks"] if c["name"] == "embedding model")
    assert embedding["status"] == "ok" and "384 dimensions" in embedding["detail"]

    async def revision() -> str | None:
        db = Database(f"sqlite+aiosqlite:///{db_path}")
        try:
            return await db.current_revision()
        finally:
            await db.dispose()

    assert asyncio.run(revision()) == migration_chain()[-2]  # doctor did not migrate


def test_doctor_on_a_fresh_data_dir_creates_no_database(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["doctor"], env={"LIFEBOT_DATA_DIR": str(tmp_path / "d")})
    assert "does not exist yet: the first start creates it" in result.output
    assert not (tmp_path / "d" / "lifebot.db").exists()


async def test_doctor_checks_the_model_can_call_a_tool(tmp_path: Path, fake_llm: FakeLLM) -> None:
    from bot.app.doctor import check_llm
    from tests.fakes.llm import call

    settings = make_settings(
        tmp_path, fake_llm, llm_model="fake-smart", llm_fast_model="fake-smart"
    )
    fake_llm.add(say("It is noon in Lisbon."))  # a model that ignores tools
    bad = await check_llm(settings)
    fake_llm.add(call("get_time_in", {"city": "Lisbon"}))
    good = await check_llm(settings)
    assert not bad.ok
    assert "did not call a tool" in bad.detail
    assert "qwen2.5" in bad.fix
    assert good.ok, good.detail
    assert "tool calls work" in good.detail
    assert fake_llm.chat_requests[-1]["tools"][0]["function"]["name"] == "get_time_in"


def test_jobs_retry_requeues_a_failed_push(tmp_path: Path) -> None:
    now = datetime.now(UTC)

    async def prepare(application: App) -> int:
        user = await make_user(application, "ana")
        async with application.db.session() as s:
            repo = OutboxRepo(s)
            await repo.enqueue([Push(user.id or 0, "reminder", "rem:1", now, text="Call mum")], now)
            row = await repo.for_key("rem:1")
            assert row is not None and row.id is not None
            await repo.claim(row.id, now, channel="fake", account="acct", chat_id="ana",
                             message_id=None)  # fmt: skip
            await repo.finish(row.id, "failed", "the chat was blocked", from_="sending")
            return row.id

    rid = _run(prepare, tmp_path)
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    retried = runner.invoke(cli, ["jobs", "retry", str(rid)], env=env)
    again = runner.invoke(cli, ["jobs", "retry", str(rid)], env=env)
    missing = runner.invoke(cli, ["jobs", "retry", "999"], env=env)

    async def row(application: App) -> Delivery | None:
        async with application.db.session() as s:
            return await OutboxRepo(s).get(rid)

    after = _run(row, tmp_path)
    assert retried.exit_code == 0, retried.output
    assert f"#{rid} (reminder for user" in retried.output
    assert after is not None
    assert after.status == "pending" and after.attempts == 0 and after.last_error is None
    assert again.exit_code == 1 and "is pending" in again.output
    assert missing.exit_code == 1 and "There is no push #999" in missing.output


def test_env_example_matches_settings() -> None:
    from bot.config import Settings

    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    assert text == render(), "regenerate it: python -m bot.app.envfile"
    for info in Settings.model_fields.values():
        alias = info.validation_alias
        names = getattr(alias, "choices", [alias])
        assert any(f"# {n}=" in text for n in names), f"{names} missing from .env.example"


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    return loaded


def test_compose_file_runs_lifebot_with_postgres_and_optional_ollama() -> None:
    services = _compose()["services"]
    assert set(services) == {"lifebot", "lifebot-2", "db", "ollama"}
    assert services["ollama"]["profiles"] == ["ollama"]
    assert services["lifebot-2"]["profiles"] == ["several"]
    for name in ("lifebot", "lifebot-2"):
        env = services[name]["environment"]
        assert env["LIFEBOT_DATABASE_URL"].startswith("postgresql://")
        assert "@db:5432/" in env["LIFEBOT_DATABASE_URL"]
        assert services[name]["depends_on"]["db"]["condition"] == "service_healthy"
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"])
    # Each process keeps its own files (as on its own host): no shared data volume.
    assert services["lifebot"]["volumes"] != services["lifebot-2"]["volumes"]
    assert (ROOT / "deploy" / services["lifebot"]["build"]["dockerfile"].split("/")[-1]).exists()
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client: the compose file was only read, not checked by docker")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the docker client has no compose plugin here")
    checked = subprocess.run(
        [docker, "compose", "-f", str(ROOT / "deploy" / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def _outside_address() -> str:
    """This machine's IPv4 address on its network (not loopback): how another host reaches it."""
    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False)
    for address in found.stdout.split():
        if "." in address and not address.startswith("127."):
            return address
    pytest.skip("this machine has no network address besides loopback")


def _fetch(url: str) -> subprocess.CompletedProcess[str]:
    """GET ``url`` from another process (this one may only reach loopback): status and body."""
    script = (
        "import sys, urllib.request\n"
        "with urllib.request.urlopen(sys.argv[1], timeout=10) as r:\n"
        "    print(r.status); print(r.read().decode())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, check=False
    )


@pytest.mark.postgres
def test_compose_files_lifebot_command_serves_the_page_beyond_its_own_loopback(
    tmp_path: Path, postgres_url: str
) -> None:
    # No docker daemon here: run the image's command with the service's environment, as the
    # container would, and reach the page the way the published port does (from outside the
    # process's loopback). Only what cannot be the same outside a container is replaced: the
    # database host, the data folder, and the port (a test never takes a fixed one).
    service = _compose()["services"]["lifebot"]
    env_config = {k: str(v) for k, v in service["environment"].items()}
    published = [str(p).rsplit(":", 1)[1] for p in service["ports"]]
    assert env_config["LIFEBOT_WEB_PORT"] in published  # the page's port is published
    assert env_config["LIFEBOT_WEB_HOST"] == "0.0.0.0"  # what is being checked
    cmd = (ROOT / "deploy" / "Dockerfile").read_text().split("CMD ", 1)[1].strip()
    assert json.loads(cmd) == ["lifebot", "serve"]
    port = _closed_port()
    env = process_env(
        tmp_path,
        **{
            **env_config,
            "LIFEBOT_DATABASE_URL": postgres_url,
            "LIFEBOT_WEB_PORT": str(port),
            "LIFEBOT_DEVICE_PORT": str(_closed_port()),
        },
    )
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "lifebot"), "serve"],
        stdin=subprocess.DEVNULL,  # docker compose gives a service no terminal input
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stderr is not None
        seen = []
        while line := proc.stderr.readline():
            seen.append(line)
            if "still serving" in line:
                break
        assert proc.poll() is None, seen
        url = f"http://{_outside_address()}:{port}"
        ready = _fetch(f"{url}/readyz")
        assert ready.returncode == 0, ready.stderr
        status, body = ready.stdout.split("\n", 1)
        assert status == "200"
        assert json.loads(body)["status"] == "ready"
        signin = _fetch(f"{url}/signin")
        assert signin.stdout.startswith("200"), signin.stderr
        # The healthcheck exactly as compose runs it inside the container (port aside).
        check = service["healthcheck"]["test"][1:]
        script = check[-1].replace(":8700/", f":{port}/")
        done = subprocess.run([sys.executable, *check[1:-1], script], check=False, timeout=30)
        assert done.returncode == 0
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_systemd_unit_runs_serve_and_restarts_on_failure() -> None:
    unit = (ROOT / "deploy" / "lifebot.service").read_text()
    keys = dict(
        line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#")
    )
    assert keys["ExecStart"].endswith("/.venv/bin/lifebot serve")
    assert keys["Restart"] == "on-failure"
    assert keys["Environment"] in {
        "LIFEBOT_LOG_FORMAT=json",
        "LIFEBOT_DATA_DIR=/var/lib/lifebot/data",
    }
    assert "[Install]" in unit and keys["WantedBy"] == "multi-user.target"
