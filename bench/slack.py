"""Slack: time from event receipt to ack while the agent is slow.

Slack wants every event acknowledged within 3 seconds. The ack must not wait for the agent, so
it is measured twice per mode: with an instant fake LLM (the in-run baseline) and with one
that takes 5 s per answer; the ratio should stay near 1. Events arrive 25 ms apart from 20
people, so many agent turns are in flight while later events are acknowledged.

Run: .venv/bin/python -m bench.slack
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench._stats import pct
from bot.adapters.slack.adapter import SlackAdapter
from bot.app.build import App, build_app, start_app, start_channels
from bot.config import Settings
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, say
from tests.fakes.slack_api import (
    APP_TOKEN,
    BOT_TOKEN,
    SIGNING_SECRET,
    TEAM_ID,
    FakeSlack,
    dm_event,
)

PEOPLE = 20
EVENTS = 60
GAP = 0.025
SLOW = 5.0


async def start(tmp: Path, mode: str, llm: FakeLLM, slack: FakeSlack) -> tuple[App, SlackAdapter]:
    settings = Settings(
        _env_file=None,
        data_dir=tmp / mode,
        openai_base_url=llm.url,
        openai_api_key="bench",
        llm_model="fake-smart",
        llm_fast_model="fake-fast",
        llm_timeout=30.0,
        slack_bot_token=BOT_TOKEN,
        slack_app_token=APP_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_mode=mode,
        slack_http_port=0,
        slack_api_url=slack.api_url,
        log_level="WARNING",
        jobs_enabled=False,
    )
    app = build_app(settings)
    await start_app(app)
    async with app.db.session() as s:
        repo = UserRepo(s)
        for i in range(PEOPLE):
            user = await repo.create(f"person {i}")
            assert user.id is not None
            await repo.add_identity(user.id, "slack", TEAM_ID, f"U{i:04d}", chat_id=f"D{i:04d}")
    await start_channels(app)
    adapter = app.dispatcher.adapters["slack"]
    assert isinstance(adapter, SlackAdapter)
    return app, adapter


async def run(mode: str, delay: float, tmp: Path) -> tuple[list[float], float, int]:
    """Ack times (s) of EVENTS events; seconds until all were answered; replies posted."""
    llm, slack = FakeLLM(), FakeSlack()
    await llm.start()
    await slack.start()
    llm.default = lambda _body: say("Here is your day.", delay=delay)
    app, adapter = await start(tmp / f"{mode}-{delay:g}", mode, llm, slack)
    acks: list[float] = []

    async def one(i: int) -> None:
        await asyncio.sleep(i * GAP)
        body = dm_event(
            "what's on my schedule today?", user=f"U{i % PEOPLE:04d}", channel=f"D{i % PEOPLE:04d}"
        )
        if mode == "http":
            assert adapter.http_url is not None
            status, _, seconds = await slack.post_event(adapter.http_url, body)
            assert status == 200
            acks.append(seconds)
        else:
            eid = await slack.deliver(body)
            acks.append((await slack.wait_ack(eid, within=30)).seconds)

    began = time.monotonic()
    try:
        await asyncio.gather(*(one(i) for i in range(EVENTS)))
        await adapter.wait_idle(120)
        answered = time.monotonic() - began
        replies = len(slack.posted)
    finally:
        await app.close()
        await slack.stop()
        await llm.stop()
    return acks, answered, replies


def line(label: str, acks: list[float]) -> str:
    ms = [a * 1000 for a in acks]
    return (
        f"  {label:<22} p50 {statistics.median(ms):7.1f} ms   p95 {pct(ms, 95):7.1f} ms   "
        f"max {max(ms):7.1f} ms"
    )


async def measure() -> None:
    print(f"slack ack latency: {EVENTS} DMs from {PEOPLE} people, {GAP * 1000:.0f} ms apart")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for mode in ("http", "socket"):
            fast, fast_done, fast_replies = await run(mode, 0.0, tmp)
            slow, slow_done, slow_replies = await run(mode, SLOW, tmp)
            print(f"{mode} mode")
            print(line("instant LLM (baseline)", fast) + f"   all answered in {fast_done:.1f} s")
            print(line(f"LLM takes {SLOW:g} s", slow) + f"   all answered in {slow_done:.1f} s")
            ratio = statistics.median(slow) / statistics.median(fast)
            print(
                f"  p50 ratio slow/baseline {ratio:.2f}; max ack {max(slow) * 1000:.0f} ms "
                f"(Slack's limit 3000 ms); replies {slow_replies}/{EVENTS} "
                f"(baseline {fast_replies}/{EVENTS})"
            )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
