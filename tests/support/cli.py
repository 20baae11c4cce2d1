"""Run the ``lifebot`` command line as a user types it: in-process, or (once) as a real process.

``run_cli`` invokes the typer app with click's CliRunner (its own stdin, stdout, stderr and
environment variables) in a worker thread: every command calls ``asyncio.run``, which needs a
thread without a running event loop, while the test's loop keeps serving the loopback fakes
(LLM, pendant server) the command talks to. ``run_lifebot`` spawns the installed ``lifebot``
entry point for the one smoke test of the real process.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import traceback
from pathlib import Path

from typer.testing import CliRunner

from bot.app.cli import app
from tests.fakes.llm import FakeLLM
from tests.support.env import process_env


def _invoke(args: list[str], cwd: Path, env: dict[str, str], stdin: str) -> tuple[int, str, str]:
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, args, input=stdin, env=env)
    err = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # What the real process would print before exiting 1: the test sees the crash.
        assert result.exc_info is not None
        err += "".join(traceback.format_exception(*result.exc_info))
    return result.exit_code, result.stdout, err


async def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "", limit: float = 60
) -> tuple[int, str, str]:
    """Run `lifebot ARGS` in-process with ``env`` set; return (code, stdout, stderr).

    The tests' own environment is already clean of LIFEBOT_/OPENAI_ settings (conftest).
    """
    return await asyncio.wait_for(
        asyncio.to_thread(_invoke, list(args), cwd, env or {}, stdin), limit
    )


def lifebot_script() -> Path:
    """The installed ``lifebot`` console script next to this Python."""
    script = Path(sys.executable).parent / "lifebot"
    assert script.exists(), f"{script} is missing: run `make .venv/.installed`"
    return script


async def run_lifebot(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "", limit: float = 60
) -> tuple[int, str, str]:
    """Spawn the real `lifebot ARGS` in a clean environment; return (code, stdout, stderr)."""
    clean = process_env(**(env or {}))
    proc = await asyncio.create_subprocess_exec(
        str(lifebot_script()),
        *args,
        cwd=cwd,
        env=clean,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), limit)
    return proc.returncode or 0, out.decode(), err.decode()


def llm_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    """Settings that point the CLI at the loopback LLM, with data under ``tmp_path``."""
    return {
        "OPENAI_BASE_URL": fake.url,
        "OPENAI_API_KEY": "k",
        "LIFEBOT_DATA_DIR": str(tmp_path / "data"),
        "LIFEBOT_LLM_MODEL": "fake-smart",
        "LIFEBOT_LLM_FAST_MODEL": "fake-fast",
    }
