"""Real ``lifebot serve`` processes on one PostgreSQL database, for the scale tests (issue 22).

Each process gets its own data directory and Telegram webhook port; ``each`` adds settings
of its own (a pendant port). The leader is whoever holds the JobLease row.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text
from sqlmodel import select

from storage.db import Database
from storage.models import JobLease
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import TOKEN, FakeTelegram
from tests.support.env import process_env


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def no_fixed_ports(env: dict[str, str]) -> dict[str, str]:
    """``env`` with every listener lifebot opens by default on a port the OS picks.

    ``serve`` opens the web page on 8700 unless told otherwise: a test that left it there
    failed whenever anything else on the machine (another lifebot) held that port.
    """
    env.setdefault("LIFEBOT_WEB_PORT", "0")
    return env


def serve_env(postgres_url: str, llm: FakeLLM, tg: FakeTelegram, **extra: str) -> dict[str, str]:
    """The environment of a ``serve`` process: this one's, cleaned, on the fakes and ``extra``.

    Telegram runs in webhook mode (the test is the load balancer); no web page, no pacing.
    """
    defaults = {
        "LIFEBOT_WEB_ENABLED": "false",  # several processes on one host: no shared web port
        "LIFEBOT_DATABASE_URL": postgres_url,
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "LIFEBOT_TELEGRAM_API_URL": tg.api_url,
        "LIFEBOT_TELEGRAM_FILE_URL": tg.file_url,
        "LIFEBOT_TELEGRAM_WEBHOOK_URL": "https://bot.example.test/telegram",
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "test-key",
        "LIFEBOT_LLM_MODEL": "fake-smart",
        "LIFEBOT_LLM_FAST_MODEL": "fake-fast",
        "LIFEBOT_EMBEDDINGS_MODEL": "fake-embed",
        "LIFEBOT_JOBS_SEND_RATE": "0",
        "LIFEBOT_TELEGRAM_EDIT_INTERVAL": "5",
    }
    return process_env(**{**defaults, **extra})  # extra overrides a default


def telegram_serve_env(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **extra: str
) -> dict[str, str]:
    """One ``serve`` process's environment: on SQLite in ``tmp_path``, the fake model and the
    fake Telegram, this checkout's code first on the path; ``extra`` adds or overrides."""
    defaults = {
        "LIFEBOT_LLM_MODEL": "fake-smart",
        "LIFEBOT_LLM_FAST_MODEL": "fake-fast",
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "k",
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "LIFEBOT_TELEGRAM_API_URL": tg.api_url,
    }
    return process_env(tmp_path, **{**defaults, **extra})


class Cluster:
    """The serve processes, their webhook ports and their logs."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.procs: list[asyncio.subprocess.Process] = []
        self.ports: list[int] = []
        """Each process's Telegram webhook port."""
        self.logs: list[Path] = []
        self.stopped: set[int] = set()

    async def start(self, n: int, each: Callable[[int], dict[str, str]] | None = None) -> None:
        """Start ``n`` processes; ``each(i)`` gives process ``i`` settings of its own."""
        exe = Path(sys.executable).parent / "lifebot"
        for i in range(len(self.procs), len(self.procs) + n):
            port = free_port()
            log = self.tmp_path / f"serve-{i}.log"
            env = {
                **self.env,
                "LIFEBOT_DATA_DIR": str(self.tmp_path / f"data-{i}"),
                "LIFEBOT_TELEGRAM_WEBHOOK_PORT": str(port),
                **(each(i) if each else {}),
            }
            with log.open("wb") as out:
                proc = await asyncio.create_subprocess_exec(
                    str(exe),
                    "serve",
                    env=no_fixed_ports(env),
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                )
            self.procs.append(proc)
            self.ports.append(port)
            self.logs.append(log)

    async def wait_listening(self, within: float = 60.0, ports: list[int] | None = None) -> None:
        """Wait until every process accepts connections on its port (``ports``: other ones)."""
        deadline = time.monotonic() + within
        for proc, port, log in zip(self.procs, ports or self.ports, self.logs, strict=True):
            while True:
                if proc.returncode is not None:
                    raise AssertionError(f"a serve process exited:\n{log.read_text()[-3000:]}")
                with contextlib.suppress(OSError):
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    await writer.wait_closed()
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"serve did not listen:\n{log.read_text()[-3000:]}")
                await asyncio.sleep(0.2)

    def index_of(self, pid: int) -> int:
        """Which process has ``pid``."""
        return next(i for i, p in enumerate(self.procs) if p.pid == pid)

    def signal(self, i: int, sig: signal.Signals) -> None:
        """Send process ``i`` a signal (remembering which ones are frozen)."""
        os.kill(self.procs[i].pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped.add(i)
        elif sig == signal.SIGCONT:
            self.stopped.discard(i)

    async def close(self) -> None:
        """Stop every process (thawing frozen ones first); kill those that do not stop."""
        for i, proc in enumerate(self.procs):
            if proc.returncode is None:
                if i in self.stopped:
                    os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    def said(self, i: int, words: str) -> int:
        """How many times process ``i``'s log has said ``words`` so far."""
        return self.logs[i].read_text(errors="replace").count(words)

    async def wait_said(self, i: int, words: str, before: int, within: float = 20.0) -> None:
        """Wait until process ``i``'s log says ``words`` more than ``before`` times."""
        deadline = time.monotonic() + within
        while self.said(i, words) <= before:
            if time.monotonic() > deadline:
                raise AssertionError(f"serve-{i} never said {words!r}\n{self.tails()}")
            await asyncio.sleep(0.1)

    def tails(self) -> str:
        """The end of every process's log, for a failure message."""
        return "\n".join(f"--- {log.name}\n{log.read_text()[-2500:]}" for log in self.logs)


async def leader_pid(db: Database) -> int | None:
    """The pid of the process holding the leader lease, or None when nobody holds it."""
    async with db.session() as s:
        lease = (await s.exec(select(JobLease))).first()
    if lease is None or lease.expires_at < datetime.now(UTC):
        return None
    return int(lease.holder.split(":")[1])


async def lock_waits(db: Database) -> str:
    """Sessions waiting on a lock and what holds them (PostgreSQL), for a failure message."""
    query = text(
        "SELECT w.pid, w.query, b.pid, b.state, b.query FROM pg_stat_activity w "
        "CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker(pid) "
        "JOIN pg_stat_activity b ON b.pid = blocker.pid WHERE w.datname = current_database()"
    )
    async with db.session() as s:
        rows = (await s.exec(query)).all()  # type: ignore[call-overload]
    return (
        "\n".join(
            f"{w} waits ({wq[:120]!r}) on {b} {state} ({bq[:120]!r})"
            for w, wq, b, state, bq in rows
        )
        or "no session waits on a lock"
    )


async def new_leader(db: Database, old: int, since: float) -> tuple[int, float]:
    """Wait for a leader other than ``old``; (its pid, seconds since ``since``)."""
    while time.monotonic() - since < 30:
        pid = await leader_pid(db)
        if pid is not None and pid != old:
            return pid, time.monotonic() - since
        await asyncio.sleep(0.1)
    raise AssertionError("no process took over within 30 s")


def spawn_serve(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One ``python -m bot serve`` with ``env``, its stderr appended to ``tmp_path/serve.log``.

    For tests that kill and restart a single process by hand (``Cluster`` runs several).
    """
    with (tmp_path / "serve.log").open("ab") as log:
        return subprocess.Popen(  # our own interpreter and arguments
            [sys.executable, "-m", "bot", "serve"],
            cwd=tmp_path,
            env=no_fixed_ports(dict(env)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
