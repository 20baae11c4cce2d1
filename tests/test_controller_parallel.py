"""Parallel read-only tools, through dispatch: reads overlap in time, changes run alone."""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from bot.agent.tools.base import Tool, ToolContext
from bot.app.build import App
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


class NoArgs(BaseModel):
    """No arguments."""


class Timed:
    """Tools that take a measurable while and record when they ran."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}

    def tool(self, name: str, *, read_only: bool) -> Tool:
        async def run(_ctx: ToolContext, _args: NoArgs) -> str:
            start = time.perf_counter()
            await asyncio.sleep(0.3)  # stands for a slow read (a search, a calendar fetch)
            self.spans[name] = (start, time.perf_counter())
            return f"{name} done"

        return Tool(name, f"Test tool {name}.", NoArgs, run, "Working…", read_only=read_only)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Seconds during which both spans ran."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


async def test_two_read_only_calls_in_one_round_run_concurrently(
    app: App, fake_llm: FakeLLM
) -> None:
    timed = Timed()
    app.tools.add(timed.tool("read_a", read_only=True))
    app.tools.add(timed.tool("read_b", read_only=True))
    await add_user(app)
    fake_llm.add(call("read_a", {}, ("read_b", {})), say("Both read."))
    await app.dispatcher.handle(make_inbound("search both for me"))
    assert channel(app).texts()[-1] == "Both read."
    shared = overlap(timed.spans["read_a"], timed.spans["read_b"])
    print(f"two 0.3 s reads in one round: they overlapped for {shared:.3f} s")
    assert shared > 0.2  # nearly all of each read ran while the other did
    results = [m["content"] for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert results == ["read_a done", "read_b done"]  # in the order the model asked


async def test_a_state_changing_call_waits_for_the_reads_before_it(
    app: App, fake_llm: FakeLLM
) -> None:
    timed = Timed()
    app.tools.add(timed.tool("read_a", read_only=True))
    app.tools.add(timed.tool("change_b", read_only=False))
    app.tools.add(timed.tool("read_c", read_only=True))
    await add_user(app)
    fake_llm.add(call("read_a", {}, ("change_b", {}), ("read_c", {})), say("Done."))
    await app.dispatcher.handle(make_inbound("find it, change it, find again"))
    a, b, c = (timed.spans[n] for n in ("read_a", "change_b", "read_c"))
    assert overlap(a, b) == 0.0 and overlap(b, c) == 0.0
    assert a[1] <= b[0] and b[1] <= c[0]
