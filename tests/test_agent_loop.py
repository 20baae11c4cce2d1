"""The agent turn: routing, tool validation, caps, budgets, prompt content."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.agent.budget import count_tokens, fit_history
from bot.agent.loop import AgentEvent, FinalAnswer, Limits, TextDelta, ToolStarted, run_turn
from bot.agent.router import Route, route_by_rules
from bot.agent.tools.base import Tool, ToolContext, ToolRegistry
from bot.app.build import App
from storage.db import Database
from storage.repos.facts import FactRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import StreamingRecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, Step, call, say
from tests.fakes.scripted_llm import ScriptedLLM, text, tools
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound


def tool_results(fake: FakeLLM, request: int = -1) -> list[str]:
    return [m["content"] for m in fake.chat_requests[request]["messages"] if m["role"] == "tool"]


class LookupArgs(BaseModel):
    """Arguments of the test's one tool."""

    what: str = ""


async def _lookup(_ctx: ToolContext, args: LookupArgs) -> str:
    return f"found {args.what or 'nothing'}"


LOOKUP = Tool("lookup", "Look something up.", LookupArgs, _lookup, "Looking it up…")
"""A tool with no storage behind it: the loop's own rules are under test."""


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    """A tool context for user 1; the database is never opened by ``lookup``."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'unused.db'}")
    yield ToolContext(user_id=1, db=db, now=ManualClock().now(), timezone="UTC")
    await db.dispose()


async def run_loop(
    llm: ScriptedLLM, ctx: ToolContext, clock: ManualClock, limits: Limits | None = None
) -> list[AgentEvent]:
    """Every event of one turn over "look it up", the final answer last."""
    system = {"role": "system", "content": "You are a test."}
    history = [{"role": "user", "content": "look it up"}]
    registry = ToolRegistry([LOOKUP])
    return [
        event
        async for event in run_turn(
            llm, registry, ctx, system, history, limits=limits or Limits(), clock=clock
        )
    ]


def loop_tool_results(llm: ScriptedLLM, call_no: int = -1) -> list[str]:
    return [m["content"] for m in llm.calls[call_no].messages if m["role"] == "tool"]


async def test_malformed_tool_arguments_go_back_to_the_model(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(
        call("create_task", '{"title": "unterminated'),
        call("create_task", {"title": ""}),
        call("no_such_tool", {}),
        call("create_task", {"title": "buy bread"}),
        say("Added it."),
    )
    result = await app.dispatcher.handle(make_inbound("add a task: buy bread"))
    assert result.reply == "Added it."
    results = tool_results(fake_llm)
    assert results[0].startswith("error: arguments are not valid JSON")
    assert results[1].startswith("error: invalid arguments for create_task: title")
    assert results[2].startswith("error: there is no tool named 'no_such_tool'")
    assert results[3] == "created task #1: buy bread"


async def test_repeating_the_same_call_is_refused_then_stopped(
    scripted_llm: ScriptedLLM, ctx: ToolContext
) -> None:
    scripted_llm.add(*[tools("lookup", {"what": "x"}) for _ in range(3)])
    events = await run_loop(scripted_llm, ctx, ManualClock())
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.stopped == "repeat"
    assert "repeating the same step" in final.text
    results = loop_tool_results(scripted_llm)
    assert results[0] == "found x"
    assert results[1].startswith("error: you already made this exact call")
    assert len(scripted_llm.calls) == 3
    assert [e for e in events if isinstance(e, ToolStarted)] == [
        ToolStarted("lookup", "Looking it up…")
    ]  # the repeats never ran the tool again


async def test_tool_call_cap_stops_the_turn(app_factory: AppFactory, fake_llm: FakeLLM) -> None:
    application = await app_factory(fake_llm, max_tool_calls=4)
    application.dispatcher.register(StreamingRecordingChannel("fake"))
    await add_user(application)
    calls = [("create_task", json.dumps({"title": f"t{i}"})) for i in range(6)]
    fake_llm.add(Step(tool_calls=calls))
    result = await application.dispatcher.handle(make_inbound("add six tasks"))
    assert result.reply is not None
    assert "limit of 4 tool calls" in result.reply


async def test_wall_clock_budget_gives_a_plain_answer(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    clock = ManualClock()
    application = await app_factory(fake_llm, turn_timeout=0.5, clock=clock)
    application.dispatcher.register(StreamingRecordingChannel("fake"))
    await add_user(application)

    def slow_model(_body: dict[str, Any]) -> Step:
        clock.advance(seconds=3)  # the model took three seconds (on the app's clock)
        return say("too late")

    fake_llm.default = slow_model
    result = await application.dispatcher.handle(make_inbound("what tasks do I have"))
    assert result.reply is not None
    assert "this took longer than my 0.5-second limit" in result.reply
    assert "too late" not in result.reply
    assert len(fake_llm.chat_requests) == 1


async def test_the_time_cap_is_checked_before_each_model_call(
    scripted_llm: ScriptedLLM, ctx: ToolContext
) -> None:
    clock = ManualClock()
    scripted_llm.add(tools("lookup", {"what": "x"}, before=lambda: clock.advance(seconds=61)))
    events = await run_loop(scripted_llm, ctx, clock, Limits(wall_seconds=60))
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.stopped == "time"
    assert "this took longer than my 60-second limit" in final.text
    assert len(scripted_llm.calls) == 1  # no second model call once the time is up
    assert final.transcript[-1]["content"] == "found x"  # the tool's work is kept


async def test_a_stream_past_the_time_cap_is_cut_off(
    scripted_llm: ScriptedLLM, ctx: ToolContext
) -> None:
    clock = ManualClock()
    scripted_llm.add(
        tools("lookup", {"what": "x"}),
        text("first words, then far too slow", chunk=12, before=lambda: clock.advance(seconds=59)),
    )
    start = clock.now()
    events: list[AgentEvent] = []
    system = {"role": "system", "content": "You are a test."}
    history = [{"role": "user", "content": "look it up"}]
    turn = run_turn(
        scripted_llm,
        ToolRegistry([LOOKUP]),
        ctx,
        system,
        history,
        limits=Limits(wall_seconds=60),
        clock=clock,
    )
    async for event in turn:
        events.append(event)
        if isinstance(event, TextDelta):
            clock.advance(seconds=1)  # each piece takes a second to arrive
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.stopped == "time"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["first words,"]
    assert clock.now() - start == timedelta(seconds=60)


async def test_rounds_cap_asks_for_an_answer_without_tools(
    scripted_llm: ScriptedLLM, ctx: ToolContext
) -> None:
    scripted_llm.add(
        tools("lookup", {"what": "a"}),
        tools("lookup", {"what": "b"}),
        text("Here is what I found."),
    )
    events = await run_loop(scripted_llm, ctx, ManualClock(), Limits(max_rounds=2))
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert (final.text, final.stopped) == ("Here is what I found.", None)
    assert [c.tools is not None for c in scripted_llm.calls] == [True, True, False]
    assert loop_tool_results(scripted_llm) == ["found a", "found b"]


async def test_progress_and_deltas_stream_to_the_channel(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    application = await app_factory(fake_llm)
    ch = StreamingRecordingChannel("fake")
    application.dispatcher.register(ch)
    await add_user(application)
    fake_llm.add(call("list_tasks", {}), say("You have nothing on your list today."))
    await application.dispatcher.handle(make_inbound("what tasks do I have?"))
    [stream] = ch.streams
    assert stream.progress_labels == ["Checking your tasks…"]
    assert len(stream.deltas) > 1
    assert "".join(stream.deltas) == "You have nothing on your list today."
    assert ch.texts() == ["You have nothing on your list today."]


async def test_ambiguous_message_is_classified_by_the_fast_model(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(say('{"route": "chat"}'), say("Why did the chicken..."))
    result = await app.dispatcher.handle(make_inbound("tell me a joke"))
    assert result.reply == "Why did the chicken..."
    classify, answer = fake_llm.chat_requests
    assert classify["model"] == "fake-fast"
    assert "tools" not in answer  # small talk gets no tools


def test_rules_route_without_the_llm() -> None:
    assert route_by_rules("/tz Europe/Lisbon") is Route.COMMAND
    assert route_by_rules("remember that my sister is Ana") is Route.REMEMBER
    assert route_by_rules("Good morning!") is Route.CHAT
    assert route_by_rules("what did I do yesterday?") is Route.AGENT
    assert route_by_rules("tell me a joke") is None


async def test_system_prompt_has_persona_local_time_and_facts(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path
) -> None:
    persona = tmp_path / "SOUL.md"
    persona.write_text("You are Jeeves, formal and exact.")
    application = await app_factory(fake_llm, persona_file=persona)
    application.dispatcher.register(StreamingRecordingChannel("fake"))
    await add_user(application, timezone="Asia/Tokyo")
    await application.dispatcher.handle(make_inbound("remember I am vegetarian"))
    fake_llm.add(say("Noted."))
    await application.dispatcher.handle(make_inbound("hello"))
    system = fake_llm.chat_requests[0]["messages"][0]["content"]
    assert system.startswith("You are Jeeves")
    assert "(Asia/Tokyo)" in system
    assert "- I am vegetarian" in system


async def test_tz_command_and_tool_change_the_users_zone(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    bad = await app.dispatcher.handle(make_inbound("/tz Mars/Olympus"))
    assert bad.reply is not None
    assert "neither a time zone nor a town I know" in bad.reply
    await app.dispatcher.handle(make_inbound("/tz Europe/Lisbon"))
    fake_llm.add(call("current_time", {}), say("It's late."))
    await app.dispatcher.handle(make_inbound("what time is it?"))
    assert "(Europe/Lisbon)" in tool_results(fake_llm)[0]


async def test_tz_knows_towns_that_name_no_zone(app: App) -> None:
    # Porto, Boston and Munich are in no zone's name: the town list and the zone boundaries
    # find them (issue 31); "Portland, Maine" is not the bigger Portland, in Oregon.
    user = await add_user(app)
    for town, zone_name, words in (
        ("Porto", "Europe/Lisbon", "Porto, Portugal"),
        ("boston", "America/New_York", "Boston, Massachusetts, United States"),
        ("Munich", "Europe/Berlin", "Munich, Germany"),
        ("Portland, Maine", "America/New_York", "Portland, Maine, United States"),
    ):
        said = await app.dispatcher.handle(make_inbound(f"/tz {town}"))
        assert said.reply is not None and f"Time zone set to {zone_name} ({words})" in said.reply
        async with app.db.session() as s:
            stored = await UserRepo(s).get(user.id or 0)
        assert stored is not None and stored.timezone == zone_name


async def test_tz_takes_utc_offsets_and_refuses_what_is_no_place(app: App) -> None:
    """ "UTC+2" is how many people name their zone; "localtime" is this server's own file."""
    user = await add_user(app)
    for said, zone_name in (("UTC+2", "Etc/GMT-2"), ("gmt -5", "Etc/GMT+5"), ("UTC+0", "UTC")):
        reply = (await app.dispatcher.handle(make_inbound(f"/tz {said}"))).reply or ""
        assert f"Time zone set to {zone_name}" in reply, reply
        if zone_name != "UTC":
            assert "no daylight saving" in reply, reply  # a town's name would follow it
        async with app.db.session() as s:
            stored = await UserRepo(s).get(user.id or 0)
        assert stored is not None and stored.timezone == zone_name
    # Offsets between hours are the zone that keeps them all year (India's, Nepal's, the
    # Marquesas'); Newfoundland's -3:30 changes in summer, so it takes a town, as does 5:20.
    for said, zone_name, words in (
        ("UTC+5:30", "Asia/Kolkata", "UTC+05:30 all year"),
        ("gmt+0545", "Asia/Kathmandu", "UTC+05:45 all year"),
        ("UTC-9:30", "Pacific/Marquesas", "UTC-09:30 all year"),
    ):
        reply = (await app.dispatcher.handle(make_inbound(f"/tz {said}"))).reply or ""
        assert f"Time zone set to {zone_name} ({words}" in reply, reply
        async with app.db.session() as s:
            stored = await UserRepo(s).get(user.id or 0)
        assert stored is not None and stored.timezone == zone_name
    await app.dispatcher.handle(make_inbound("/tz UTC"))
    refused = ("UTC-3:30", "UTC+5:20", "UTC+15", "localtime", "posixrules", "Factory", "x" * 5000)
    for said in refused:
        result = await app.dispatcher.handle(make_inbound(f"/tz {said}"))
        assert result.status == "command", (said, result)
        reply = result.reply or ""
        assert "neither a time zone nor a town I know" in reply, (said, reply)
    async with app.db.session() as s:
        stored = await UserRepo(s).get(user.id or 0)
    assert stored is not None and stored.timezone == "UTC"  # the last good one


def test_history_is_trimmed_to_the_token_budget_without_orphan_tool_results() -> None:
    system = {"role": "system", "content": "s"}
    history: list[dict[str, Any]] = [{"role": "user", "content": "word " * 400} for _ in range(10)]
    history.append({"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]})
    history.append({"role": "tool", "tool_call_id": "1", "content": "x " * 50})
    history.append({"role": "user", "content": "latest question"})
    kept = fit_history(system, history, budget=1000)
    assert kept[0] == system
    assert kept[-1]["content"] == "latest question"
    assert sum(count_tokens(str(m.get("content") or "")) for m in kept) <= 1000
    assert kept[1]["role"] != "tool"
    assert len(kept) < len(history)


async def test_large_tool_results_are_cut_with_a_note(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    application = await app_factory(fake_llm, tool_result_tokens=100)
    application.dispatcher.register(StreamingRecordingChannel("fake"))
    user = await add_user(application)
    assert user.id is not None
    async with application.db.session() as s:  # sixty facts, stored directly: fast
        for i in range(60):
            await FactRepo(s).add(user.id, f"fact number {i} is long enough", "notes")
    fake_llm.add(call("list_facts", {}), say("Many."))
    await application.dispatcher.handle(make_inbound("what facts do you know about me?"))
    [result] = tool_results(fake_llm)
    assert "[... cut:" in result
    assert count_tokens(result) < 130
    assert "fact number" in result  # the start of the list is kept


async def test_channel_failure_is_logged_and_the_reply_is_kept(app: App, fake_llm: FakeLLM) -> None:
    from sqlmodel import select

    from bot.errors import TransientChannelError
    from storage.models import Message

    await add_user(app)
    channel(app).fail_with = TransientChannelError("network down")
    fake_llm.add(say("hello!"))
    result = await app.dispatcher.handle(make_inbound("hi"))
    assert result.receipt is None
    async with app.db.session() as s:
        out = (await s.exec(select(Message).where(Message.direction == "out"))).one()
    assert out.text == "hello!"
    assert out.external_id is None  # never marked delivered without a receipt
