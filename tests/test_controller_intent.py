"""Tools by intent, through dispatch: what the model is offered per request, and the widening."""

from __future__ import annotations

import json
from typing import Any

from bot.agent.budget import count_tokens
from bot.agent.intent import Confidence, classify_intent
from bot.app.build import App
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound

TASKS = {"create_task", "list_tasks", "complete_task", "ask_user"}  # asking back: always
RESOLUTION = {"current_time", "list_facts", "search_memory"}


def offered(request: dict[str, Any]) -> set[str]:
    """The tool names one model request offered."""
    return {t["function"]["name"] for t in request.get("tools") or []}


async def test_a_clear_request_is_offered_its_group_only(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(call("create_task", {"title": "buy milk"}), say("Added."))
    await app.dispatcher.handle(make_inbound("add a task to buy milk"))
    assert channel(app).texts()[-1] == "Added."
    assert offered(fake_llm.chat_requests[0]) == TASKS


async def test_two_groups_add_the_resolution_tools(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(say("Nothing booked."))
    await app.dispatcher.handle(make_inbound("remind me before my meetings"))
    assert (
        classify_intent("remind me before my meetings", app.tools).confidence is Confidence.MEDIUM
    )
    shown = offered(fake_llm.chat_requests[0])
    assert {"set_reminder", "list_events", *RESOLUTION} <= shown
    assert not shown & {"create_task", "list_tasks", "complete_task"}


async def test_an_unclear_request_is_offered_everything(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(say("Sure."))
    await app.dispatcher.handle(make_inbound("can you help me plan my sunday"))
    assert offered(fake_llm.chat_requests[0]) == set(app.tools.names())


async def test_a_round_without_progress_widens_the_offer_within_the_turn(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(
        call("list_tasks"),  # "no tasks": nothing useful came back
        call("search_memory", {"query": "groceries"}),
        say("You have no tasks, and I found nothing about groceries."),
    )
    await app.dispatcher.handle(make_inbound("what tasks do I have about groceries?"))
    first, second, third = (offered(r) for r in fake_llm.chat_requests[-3:])
    assert first == TASKS
    assert second == TASKS | RESOLUTION  # one step wider after the empty round
    # The search found nothing either: everything, less what the untrusted read withdrew.
    assert third == set(app.tools.read_only_names())


async def test_calling_a_tool_that_was_not_shown_still_works_and_shows_everything(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(call("current_time"), say("It is late; no tasks."))
    await app.dispatcher.handle(make_inbound("what tasks do I have"))
    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert not tool_result.startswith("error")
    assert offered(fake_llm.chat_requests[-1]) == set(app.tools.names())


async def test_prompt_tokens_per_turn_drop_when_tools_follow_the_intent(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """The same one-round turns with and without tools by intent; prints the figures."""
    asks = [
        "add a task to buy milk",
        "remind me at 6 to call mum",
        "what's on my calendar tomorrow",
        "how has my stress been lately",
        "what did Ana say about the trip",
        "remind me before my meetings",
    ]
    costs: dict[bool, int] = {}
    for by_intent in (False, True):
        application = await app_factory(fake_llm, tools_by_intent=by_intent)
        await add_user(application, f"u{by_intent}")
        start = len(fake_llm.chat_requests)
        for ask in asks:
            fake_llm.add(say("Okay."))
            await application.dispatcher.handle(make_inbound(ask, sender=f"u{by_intent}"))
        requests = [r for r in fake_llm.chat_requests[start:] if r.get("tools")]
        assert len(requests) == len(asks)
        costs[by_intent] = sum(count_tokens(json.dumps(r["tools"])) for r in requests)
    before, after = costs[False] / len(asks), costs[True] / len(asks)
    print(f"tool-schema tokens per turn: all tools {before:.0f}, by intent {after:.0f}")
    assert after < before / 2
