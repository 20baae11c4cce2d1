"""Hardening (#18) items 8 and 9: hostile text and out-of-range tool arguments never crash."""

from __future__ import annotations

import pytest
from sqlmodel import select

from bot.app.build import App
from storage.models import Message, Reminder
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


async def test_a_lone_surrogate_or_a_nul_is_stored_and_answered(
    any_db_app: App, fake_llm: FakeLLM
) -> None:
    app = any_db_app
    await add_user(app, "ana")
    fake_llm.default = lambda _body: say("Got your odd message.")

    result = await app.dispatcher.handle(
        make_inbound("half an emoji \ud83d and a nul \x00 here", sender="ana", name="An\x00a")
    )

    assert result.status == "answered"
    assert channel(app).texts("ana")[-1] == "Got your odd message."
    async with app.db.session() as s:
        stored = (await s.exec(select(Message).where(Message.direction == "in"))).one()
    assert stored.text == "half an emoji \ufffd and a nul  here"


@pytest.mark.parametrize("fact_id", [2**31, 2**40, 2**70])
async def test_a_tool_id_no_row_can_have_goes_back_to_the_model(
    any_db_app: App, fake_llm: FakeLLM, fact_id: int
) -> None:
    # 2**31 and 2**40 fit in 64 bits but not in the id columns (INTEGER): on PostgreSQL the
    # driver failed on them and the person got "something went wrong".
    app = any_db_app
    await add_user(app, "ana")
    fake_llm.add(call("forget_fact", {"fact_id": fact_id}), say("There is no such fact."))

    result = await app.dispatcher.handle(make_inbound(f"forget fact {fact_id}", sender="ana"))

    assert result.status == "answered"
    assert channel(app).texts("ana")[-1] == "There is no such fact."
    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert tool_result.startswith("error: invalid arguments for forget_fact: fact_id")


async def test_a_nul_in_a_tool_argument_is_dropped_before_it_is_stored(
    any_db_app: App, fake_llm: FakeLLM
) -> None:
    app = any_db_app
    await add_user(app, "ana")
    fake_llm.add(
        call("set_reminder", {"request": "tomorrow at 9 to call \x00mum \ud83d"}),
        say("Done."),
    )

    result = await app.dispatcher.handle(
        make_inbound("remind me tomorrow at 9 to call mum", sender="ana")
    )

    assert result.status == "answered"
    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert "reminder #" in tool_result, tool_result
    async with app.db.session() as s:
        [reminder] = (await s.exec(select(Reminder))).all()
    assert "\x00" not in reminder.text and reminder.text.startswith("call mum")


async def test_a_20000_deep_json_frame_gets_malformed_json_and_the_socket_stays(
    app: App,
) -> None:
    import json

    from tests.support.device import _frame, _open, add_device, running_device

    _, token = await add_device(app, "pendant-deep")
    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send("[" * 20_000 + "]" * 20_000)
        assert (await _frame(ws))["code"] == "malformed_json"
        await ws.send('{"type": "hello", "x": ' + "[" * 10_000 + "]" * 10_000 + "}")
        assert (await _frame(ws))["code"] == "malformed_json"
        await ws.send(json.dumps({"type": "hello"}))
        assert (await _frame(ws))["type"] == "ready"
