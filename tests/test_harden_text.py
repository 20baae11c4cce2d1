"""Hardening (#18) items 8 and 9: hostile text and out-of-range tool arguments never crash."""

from __future__ import annotations

from sqlmodel import select

from bot.app.build import App
from storage.models import Message
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


async def test_a_tool_id_beyond_int64_goes_back_to_the_model(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app, "ana")
    fake_llm.add(call("forget_fact", {"fact_id": 2**70}), say("There is no such fact."))

    result = await app.dispatcher.handle(
        make_inbound("forget fact 1180591620717411303424", sender="ana")
    )

    assert result.status == "answered"
    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert tool_result.startswith("error: invalid arguments for forget_fact")


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
