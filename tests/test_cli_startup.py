"""The CLI answers at once: `--help` and memory commands do not import what they never use."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from storage.db import Database
from storage.repos.users import UserRepo
from tests.support.app import migrated_sqlite_url
from tests.support.env import process_env

# Each of these takes from a tenth of a second to a second to import on a small machine.
HEAVY = {
    "faster_whisper", "ctranslate2", "onnxruntime", "av", "telegram", "slack_bolt", "slack_sdk",
    "openai", "sqlalchemy", "sqlmodel", "alembic", "apscheduler", "numpy", "websockets",
    "aiohttp", "pydantic_settings", "rich", "tiktoken", "fastapi", "uvicorn", "matplotlib",
    "prometheus_client",
}  # fmt: skip

# What `memory search` may not touch: no model client, no channel, no speech, no scheduler,
# no web server or charts, and no Alembic once the database is up to date.
NOT_FOR_SEARCH = {
    "faster_whisper", "ctranslate2", "av", "telegram", "slack_bolt", "slack_sdk", "openai",
    "alembic", "apscheduler", "websockets", "aiohttp", "fastapi", "uvicorn", "matplotlib",
    "prometheus_client",
}  # fmt: skip

PROBE = """
import json, sys
from bot.app.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules}),
                  "pg": "sqlalchemy.dialects.postgresql" in sys.modules}), file=sys.stderr)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return process_env(tmp_path)


def _report(
    tmp_path: Path, *args: str, extra: dict[str, str] | None = None
) -> tuple[dict[str, object], str]:
    proc = subprocess.run(  # our own interpreter and arguments
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**_env(tmp_path), **(extra or {})},
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1]), proc.stdout


def _modules(
    tmp_path: Path, *args: str, extra: dict[str, str] | None = None
) -> tuple[int, set[str], str]:
    report, out = _report(tmp_path, *args, extra=extra)
    return int(str(report["code"])), set(report["modules"]), out  # type: ignore[call-overload]


def test_help_imports_nothing_heavy(tmp_path: Path) -> None:
    code, modules, out = _modules(tmp_path, "--help")
    assert code == 0
    assert "serve" in out
    assert "memory" in out
    assert not modules & HEAVY, f"`lifebot --help` imports {sorted(modules & HEAVY)}"


@pytest.mark.parametrize("group", ["memory", "device", "jobs", "users", "doctor"])
def test_subcommand_help_imports_nothing_heavy(tmp_path: Path, group: str) -> None:
    code, modules, out = _modules(tmp_path, group, "--help")
    assert code == 0, out
    assert not modules & HEAVY, f"`lifebot {group} --help` imports {sorted(modules & HEAVY)}"


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], str]:
    """One cold ``memory search`` (what it imported) in a database at the newest schema.

    Both tests below read the same run: a cold search starts an interpreter and the
    embedding model, the slow part of this module. The database and its user are made here,
    in this process (a ``lifebot users add`` first cost another interpreter's start).
    """
    tmp_path = tmp_path_factory.mktemp("search")
    url = migrated_sqlite_url(tmp_path / "data" / "lifebot.db")

    async def add_alice() -> None:
        db = Database(url)
        try:
            async with db.session() as s:
                await UserRepo(s).create("alice")
        finally:
            await db.dispose()

    asyncio.run(add_alice())
    return _report(tmp_path, "memory", "search", "sunsets", "--user", "alice")


def test_memory_search_loads_no_model_client_channel_or_migrator(
    searched: tuple[dict[str, object], str],
) -> None:
    # The database is at the newest schema: the search finds it up to date.
    report, out = searched
    assert report["code"] == 0, out
    loaded = set(report["modules"]) & NOT_FOR_SEARCH  # type: ignore[call-overload]
    assert not loaded, f"`lifebot memory search` imports {sorted(loaded)}"
    # On SQLite, SQLAlchemy's PostgreSQL dialect (0.1 s to import) stays unloaded too.
    assert report["pg"] is False, out


def test_memory_search_stems_with_the_c_snowball_engine(
    searched: tuple[dict[str, object], str],
) -> None:
    # The pure-Python stemmer made tokenising a few thousand messages cost most of a cold
    # search; snowballstemmer switches to PyStemmer (same Snowball rules, in C) when present.
    report, out = searched
    assert report["code"] == 0, out
    assert "Stemmer" in set(report["modules"])  # type: ignore[call-overload]


# What a command that opens the whole app (users, backup, export...) never uses: the MCP SDK
# (the /mcp endpoint and the clients load it when they run), the web server, the model
# client, the channels, speech and charts.
NOT_FOR_APP_COMMANDS = {
    "mcp", "aiohttp", "fastapi", "starlette", "uvicorn", "openai", "telegram", "slack_bolt",
    "slack_sdk", "faster_whisper", "ctranslate2", "websockets", "matplotlib",
}  # fmt: skip


def test_a_command_that_opens_the_app_loads_no_mcp_sdk_web_server_or_channel(
    tmp_path: Path,
) -> None:
    code, _, out = _modules(tmp_path, "users", "add", "alice")
    assert code == 0, out
    code, modules, out = _modules(tmp_path, "users")
    assert code == 0, out
    assert "alice" in out
    loaded = modules & NOT_FOR_APP_COMMANDS
    assert not loaded, f"`lifebot users` imports {sorted(loaded)}"


def test_the_console_loads_the_mcp_sdk_only_when_a_server_is_configured(tmp_path: Path) -> None:
    # `serve` and `chat` start the operator's MCP servers; with none configured, the SDK
    # (about a second of CPU to import) was still loaded by every start.
    code, modules, out = _modules(tmp_path, "chat")
    assert code == 0, out
    assert "mcp" not in modules, "`lifebot chat` with no MCP server imports the MCP SDK"
    # With a server configured, the console starts it: tests/test_mcp_client.py.


def test_an_embeddings_endpoint_loads_the_model_sdk_only_when_it_embeds(tmp_path: Path) -> None:
    # With LIFEBOT_EMBEDDINGS_MODEL set, building the app made the endpoint's SDK client, so
    # every `serve` start imported ``openai`` (about a second of CPU) before answering anyone.
    extra = {
        "LIFEBOT_EMBEDDINGS_MODEL": "text-embedding-3-small",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # never called: nothing is embedded
        "OPENAI_API_KEY": "test-key",
    }
    code, modules, out = _modules(tmp_path, "chat", extra=extra)
    assert code == 0, out
    assert "openai" not in modules, "`lifebot chat` imports openai before it embeds anything"


def test_the_web_page_loads_the_api_reference_package_only_for_its_files(tmp_path: Path) -> None:
    # serve with the web page imported swagger_ui (and YAML with it) to find two static files.
    probe = "import sys, bot.web.app; print(sorted({'swagger_ui', 'yaml'} & set(sys.modules)))"
    proc = subprocess.run(  # our own interpreter and code
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout
