"""Benchmark: messages per second through 1, 2 and 3 ``lifebot serve`` processes on PostgreSQL.

    .venv/bin/python -m bench.cluster --database-url postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python -m bench.cluster --processes 1,3 --chats 50 --rounds 2

Real processes, as an operator deploys them: each run gets a fresh PostgreSQL database (made
on the server ``--database-url`` names, or ``LIFEBOT_TEST_POSTGRES_URL``) and N ``serve``
processes with Telegram in webhook mode. This process is the load balancer: every chat sends
its next message, round robin over the processes, once the previous one was answered, and
``--chats`` chats do so at once. The model (a loopback fake answering at once) and Telegram's
servers (a loopback fake) run in this process, on the same cores as the servers: the figures
are what the machine does as a whole, and the ratio to one process is what adding processes
buys here. Without a PostgreSQL server the benchmark says so and skips.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench._stats import pct
from bot.config import normalise_database_url
from storage.db import Database
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, Step, say
from tests.fakes.telegram_api import BOT_ID, FakeTelegram
from tests.support.serve import Cluster, serve_env


def _answer(body: dict[str, Any]) -> Step:
    """The model: routes every message to a plain chat and echoes it at once."""
    system = str(body["messages"][0].get("content", ""))
    if "Classify the user's message" in system:
        return say('{"route": "chat"}')
    if body.get("model") != "fake-smart":
        return say("{}")  # memory extraction and the like find nothing
    last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return say(f"re: {last}")


async def _admin(server: str, sql: str) -> None:
    import asyncpg  # noqa: PLC0415  # only this benchmark talks to the server directly

    conn = await asyncpg.connect(server.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def run(server: str, processes: int, chats: int, rounds: int) -> tuple[float, list[float]]:
    """(messages per second, reply latencies in seconds) for one cluster size."""
    name = f"lifebot_bench_{uuid.uuid4().hex[:10]}"
    await _admin(server, f'CREATE DATABASE "{name}"')
    url = normalise_database_url(server).rsplit("/", 1)[0] + f"/{name}"
    llm, tg = FakeLLM(), FakeTelegram()
    llm.default = _answer
    await llm.start()
    await tg.start()
    db = Database(url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = serve_env(url, llm, tg, LIFEBOT_LOG_LEVEL="WARNING")
            cluster = Cluster(Path(tmp), env)
            try:
                await cluster.start(processes)
                await cluster.wait_listening(within=120)
                ids = [700_000 + i for i in range(chats)]
                async with db.session() as s:
                    repo = UserRepo(s)
                    for chat in ids:
                        await repo.create_with_identity(
                            f"u{chat}", "telegram", str(BOT_ID), str(chat), chat_id=str(chat)
                        )
                while not tg.webhook_secret:  # noqa: ASYNC110  # the fake has no event for it
                    await asyncio.sleep(0.1)
                return await _drive(tg, cluster.ports, ids, rounds)
            finally:
                await cluster.close()
    finally:
        await db.dispose()
        await llm.stop()
        await tg.stop()
        await _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _drive(
    tg: FakeTelegram, ports: list[int], chats: list[int], rounds: int
) -> tuple[float, list[float]]:
    """Every chat sends ``rounds`` messages, each after the previous reply, all chats at once."""
    update_ids = itertools.count(1)
    turn = itertools.cycle(range(len(ports)))
    latencies: list[float] = []
    headers = {"X-Telegram-Bot-Api-Secret-Token": tg.webhook_secret or ""}

    async def chat(http: aiohttp.ClientSession, chat_id: int) -> None:
        for r in range(rounds):
            update = {"update_id": next(update_ids), "message": tg.message(chat_id, f"m{r}")}
            sent = time.perf_counter()
            url = f"http://127.0.0.1:{ports[next(turn)]}/telegram"
            async with http.post(url, json=update, headers=headers) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"webhook answered {resp.status}: {await resp.text()}")
            while len(tg.texts(chat_id)) <= r:  # noqa: ASYNC110  # polled like a client would
                await asyncio.sleep(0.02)
            latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    async with aiohttp.ClientSession() as http:
        await asyncio.wait_for(asyncio.gather(*(chat(http, c) for c in chats)), 600)
    return len(chats) * rounds / (time.perf_counter() - start), latencies


def main() -> None:
    """Run each cluster size on the same load; print messages/s and the ratio to one process."""
    parser = argparse.ArgumentParser(prog="python -m bench.cluster")
    parser.add_argument("--database-url", default=os.environ.get("LIFEBOT_TEST_POSTGRES_URL"))
    parser.add_argument("--processes", default="1,2,3", help="cluster sizes, comma-separated")
    parser.add_argument("--chats", type=int, default=100, help="conversations at once")
    parser.add_argument("--rounds", type=int, default=3, help="messages per conversation")
    args, _ = parser.parse_known_args()
    if not args.database_url:
        print("skipped: no PostgreSQL server (--database-url or LIFEBOT_TEST_POSTGRES_URL)")
        return
    sizes = [int(n) for n in args.processes.split(",")]
    print(
        f"{args.chats} conversations x {args.rounds} messages, Telegram webhook round robin, "
        f"a model answering at once; {os.cpu_count()} cores shared with the fakes"
    )
    base: float | None = None
    for n in sizes:
        rate, lat = asyncio.run(run(args.database_url, n, args.chats, args.rounds))
        base = base or rate
        first = f"{sizes[0]} process{'es' if sizes[0] > 1 else ''}"
        print(
            f"{n} process{'es' if n > 1 else '  '}: {rate:6.1f} msg/s ({rate / base:.2f}x "
            f"{first})  reply p50 {pct(lat, 50) * 1000:.0f} ms  p95 {pct(lat, 95) * 1000:.0f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
