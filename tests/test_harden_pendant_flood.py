"""Hardening (#29): a flood of half-open sockets against a real ``lifebot serve`` whose process
may hold only 256 descriptors. The server refuses what is over its cap before the WebSocket
upgrade (so ``accept`` never runs out of descriptors and the log stays short) and the owner's
pendant still connects while the flood goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from tests.support.app import AppFactory
from tests.support.device import add_device
from tests.support.env import process_env
from tests.support.serve import free_port

ROOT = Path(__file__).resolve().parent.parent
DESCRIPTORS = 256
"""The serve process's limit on open files (soft and hard: serve cannot raise it)."""
FLOOD_SOCKETS = 600
"""Half-open sockets the flood keeps open at once: more than the process may hold."""
FLOOD_SECONDS = 5.0
"""How long the flood lasts; the owner connects once every flooding socket has been opened."""


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


def _serve(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = process_env(
        tmp_path,
        LIFEBOT_DEVICE_HOST="127.0.0.1",
        LIFEBOT_DEVICE_PORT=str(port),
        LIFEBOT_STT_THREADS="1",
        LIFEBOT_JOBS_ENABLED="false",
        LIFEBOT_WEB_ENABLED="false",
    )
    with (tmp_path / "serve.log").open("ab") as log:
        return subprocess.Popen(  # our own interpreter and arguments
            [sys.executable, "-m", "bot", "serve"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=_limit_descriptors,  # noqa: PLW1509  (setrlimit only, before exec)
        )


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"lifebot serve exited early:\n{_tail(log)}"
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError(f"lifebot serve did not listen:\n{_tail(log)}")


async def _half_open(port: int, source: str, stop: float, began: set[int] | None = None) -> int:
    """Keep one socket busy until ``stop``: connect from ``source``, send nothing, reconnect
    when the server drops it. Returns how many sockets it opened; once it opened its first,
    its task's id is added to ``began``."""
    opened = 0
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(source, 0)
            )
        except OSError:
            await asyncio.sleep(0.05)
            continue
        opened += 1
        if began is not None:
            began.add(id(asyncio.current_task()))
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(reader.read(1024), max(0.01, stop - time.monotonic()))
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return opened


async def _owner_connects(port: int, token: str) -> float:
    """Seconds for the owner's pendant to get ``ready`` (it retries like firmware would)."""
    url = f"ws://127.0.0.1:{port}/v1/device"
    start = time.monotonic()
    for _ in range(5):
        try:
            async with connect(
                url,
                additional_headers={"Authorization": f"Bearer {token}"},
                proxy=None,
                open_timeout=5,
            ) as ws:
                await ws.send(json.dumps({"type": "hello"}))
                async with asyncio.timeout(5):
                    while json.loads(await ws.recv())["type"] != "ready":
                        pass
                return time.monotonic() - start
        except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed):
            await asyncio.sleep(0.5)  # refused or dropped: try again, as firmware would
    raise AssertionError("the owner's pendant never connected during the flood")


@pytest.mark.slow
async def test_a_flood_under_256_descriptors_logs_little_and_the_owner_still_connects(
    app_factory: AppFactory, tmp_path: Path
) -> None:
    app = await app_factory()
    _, token = await add_device(app, "pendant-flood")
    port = free_port()
    log = tmp_path / "data" / "lifebot.log"  # serve's log when only the pendant runs
    proc = _serve(tmp_path, port)
    try:
        await _wait_listening(port, proc, tmp_path / "serve.log")
        before = len(log.read_text(errors="replace").splitlines())
        stop = time.monotonic() + FLOOD_SECONDS
        began: set[int] = set()
        # From 100 loopback addresses: the per-address cap alone does not stop it.
        flood = [
            asyncio.create_task(_half_open(port, f"127.0.1.{i % 100 + 1}", stop, began))
            for i in range(FLOOD_SOCKETS)
        ]
        while len(began) < FLOOD_SOCKETS:  # the flood is at full strength
            assert time.monotonic() < stop, f"only {len(began)} flooding sockets ever opened"
            await asyncio.sleep(0.05)
        owner_seconds = await _owner_connects(port, token)
        assert time.monotonic() < stop, "the owner connected only once the flood was over"
        opened = sum(await asyncio.gather(*flood))
        assert proc.poll() is None, "serve died under the flood"
        # Still serving once the flood is over.
        assert await _owner_connects(port, token) < 5
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    lines = log.read_text(errors="replace").splitlines()[before:]
    emfile = [line for line in lines if "Too many open files" in line]
    refused = [line for line in lines if "refused" in line and "pendant connection" in line]
    print(
        f"flood: {opened} sockets opened, {len(lines)} log lines, {len(emfile)} 'Too many open "
        f"files', {len(refused)} refusal summaries; owner ready after {owner_seconds:.2f} s"
    )
    assert opened > FLOOD_SOCKETS  # the flood really ran (sockets were closed and reopened)
    assert len(emfile) <= 50, "\n".join(lines[:80])
    assert len(lines) <= 50, "\n".join(lines[:80])
    assert refused, "the refused burst was never logged"


ACCEPTING_SERVER = """
import asyncio, logging, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
from bot.app.accept_log import throttle_accept_errors

async def main():
    throttle_accept_errors()
    held = []
    async def keep(reader, writer):
        held.append(writer)  # never let go: the process runs out of descriptors
        await asyncio.sleep(3600)
    server = await asyncio.start_server(keep, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(float(sys.argv[1]))
    logging.shutdown()
    os._exit(0)  # the held sockets need no goodbye

asyncio.run(main())
"""


async def test_a_process_out_of_descriptors_logs_a_count_not_a_traceback_per_accept(
    tmp_path: Path,
) -> None:
    """Whatever exhausts the descriptors (not the pendant server), the log stays short."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ACCEPTING_SERVER,
        "3",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    port = int(await asyncio.wait_for(proc.stdout.readline(), 30))
    stop = time.monotonic() + 2.0  # the 48 descriptors run out at once; accepts fail after
    flood = [asyncio.create_task(_half_open(port, "127.0.0.1", stop)) for _ in range(200)]
    await asyncio.gather(*flood)
    err = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
    await proc.wait()
    failures = [line for line in err.splitlines() if "Too many open files" in line]
    assert len(failures) == 1, err[-3000:]  # one line (the next would come a minute later)
    assert "could not accept" in failures[0] and "Traceback" not in err
