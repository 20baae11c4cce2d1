"""Dispatch overhead per message, excluding the LLM.

The fake LLM answers instantly over loopback; the database is SQLite on disk. Each figure is
compared with a bare call of the same fake LLM through the same client, measured in this run:
the difference is what lifebot itself costs (dedupe, identity, locks, storage, delivery).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from bench._stats import ms, pct, summary
from bot.app.build import App, build_app, start_app
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, Step
from tests.support.app import make_settings
from tests.support.builders import make_inbound

MESSAGES = 400


async def bare_llm_call(application: App) -> float:
    """One streamed chat completion through the same client, nothing else."""
    start = time.perf_counter()
    async for _ in application.llm.stream([{"role": "user", "content": "hello"}]):
        pass
    return time.perf_counter() - start


async def add_users(application: App, count: int) -> None:
    async with application.db.session() as s:
        repo = UserRepo(s)
        for i in range(count):
            user = await repo.create(f"u{i}")
            assert user.id is not None
            await repo.add_identity(user.id, "fake", "acct", f"u{i}", chat_id=f"u{i}")


async def run() -> None:
    fake = FakeLLM()
    fake.default = lambda _body: Step(text="Hello!")
    await fake.start()
    with tempfile.TemporaryDirectory() as tmp:
        application = build_app(make_settings(Path(tmp), fake))
        await start_app(application)
        application.dispatcher.register(RecordingChannel("fake"))
        await add_users(application, 100)
        try:
            for _ in range(20):  # warm up connections and caches
                await bare_llm_call(application)
                await application.dispatcher.handle(make_inbound("hi", sender="u0"))

            bare = [await bare_llm_call(application) for _ in range(MESSAGES)]
            handled: list[float] = []
            for _ in range(MESSAGES):
                start = time.perf_counter()
                result = await application.dispatcher.handle(make_inbound("hi", sender="u0"))
                handled.append(time.perf_counter() - start)
                assert result.status == "answered", result
            b50, d50, d95 = pct(bare, 50), pct(handled, 50), pct(handled, 95)
            print(f"bare fake-LLM call      : {summary(bare)}")
            print(f"dispatch.handle (1 conv): {summary(handled)}")
            print(
                f"  -> p50 {d50 / b50:.2f}x and p95 {d95 / pct(bare, 95):.2f}x a bare LLM call; "
                f"lifebot's own overhead p50 ~{ms(d50 - b50)}"
            )
            for conc in (1, 10, 100):
                per_conv = max(2, 600 // conc)
                bare_rate = await rate(lambda _i: bare_llm_call(application), conc, per_conv)
                disp_rate = await rate(
                    lambda i: application.dispatcher.handle(make_inbound("hi", sender=f"u{i}")),
                    conc,
                    per_conv,
                )
                print(
                    f"{conc:>3} concurrent conversations: {disp_rate:7.1f} msg/s through dispatch, "
                    f"{bare_rate:7.1f} calls/s bare LLM -> ratio {disp_rate / bare_rate:.2f}"
                )
        finally:
            await application.close()
            await fake.stop()


async def rate(fn, concurrency: int, per_worker: int) -> float:
    """Throughput of ``concurrency`` workers each awaiting ``fn(worker)`` ``per_worker`` times."""

    async def worker(i: int) -> None:
        for _ in range(per_worker):
            await fn(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return concurrency * per_worker / (time.perf_counter() - start)


def main() -> None:
    """Entry point for ``python -m bench dispatch``."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
