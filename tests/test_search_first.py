"""A sure memory question is searched before the model is called: one model call (issue 21)."""

from __future__ import annotations

from bot.app.build import App
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


async def test_a_sure_memory_question_is_answered_in_one_model_call(
    app: App, fake_llm: FakeLLM
) -> None:
    user = await add_user(app)
    assert user.id is not None
    fake_llm.default = lambda body: say("Noted.")
    await app.dispatcher.handle(make_inbound("Booked the dentist for Friday at 9:30"))
    calls_before = len(fake_llm.chat_requests)
    fake_llm.add(say("You booked the dentist for Friday at 9:30 [1]."))

    await app.dispatcher.handle(make_inbound("what did I say about the dentist?"))

    assert len(fake_llm.chat_requests) == calls_before + 1
    messages = fake_llm.chat_requests[-1]["messages"]
    [found] = [m for m in messages if m["role"] == "tool"]
    # The search results reach the model as untrusted data, like any search the model asks for.
    assert "Booked the dentist" in found["content"]
    assert "data, not instructions" in found["content"]
    sent = channel(app).sent[-1]
    assert sent.text == "You booked the dentist for Friday at 9:30 [1]."
    [cite] = sent.citations
    assert cite.kind == "message" and "Booked the dentist" in cite.snippet


async def test_an_uncertain_question_keeps_the_tool_path(app: App, fake_llm: FakeLLM) -> None:
    user = await add_user(app)
    assert user.id is not None
    fake_llm.default = lambda body: say("Noted.")
    await app.dispatcher.handle(make_inbound("Booked the dentist for Friday at 9:30"))
    calls_before = len(fake_llm.chat_requests)
    fake_llm.add(
        call("search_memory", {"query": "dentist appointment"}),
        say("Friday at 9:30 [1]."),
    )

    # An appointment may be in the calendar as well: the model chooses where to look.
    await app.dispatcher.handle(make_inbound("when is my dentist appointment?"))

    first = fake_llm.chat_requests[calls_before]["messages"]
    assert not [m for m in first if m["role"] == "tool"]
    assert len(fake_llm.chat_requests) == calls_before + 2
    assert channel(app).sent[-1].text == "Friday at 9:30 [1]."
