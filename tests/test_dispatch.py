"""End to end through dispatch: storage, identity, agent loop, delivery."""

from __future__ import annotations

import pytest
from sqlmodel import col, select

from bot.app.build import App
from storage.models import Fact, Message, PairingRequest
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


async def test_question_needing_a_tool_is_answered_after_the_tool_result(
    app: App, fake_llm: FakeLLM
) -> None:
    user = await add_user(app)
    fake_llm.add(call("create_task", {"title": "buy milk"}), say("Added: buy milk."))

    result = await app.dispatcher.handle(make_inbound("add a task to buy milk"))

    assert result.status == "answered"
    assert channel(app).texts() == ["Added: buy milk."]
    second = fake_llm.chat_requests[1]["messages"]
    assert second[-1]["role"] == "tool" and "created task #1: buy milk" in second[-1]["content"]
    async with app.db.session() as s:
        rows = (
            await s.exec(
                select(Message).where(Message.user_id == user.id).order_by(col(Message.id))
            )
        ).all()
    roles = [(r.direction, r.role) for r in rows]
    assert roles == [
        ("in", "user"),
        ("internal", "assistant"),
        ("internal", "tool"),
        ("out", "assistant"),
    ]
    assert rows[1].tool_calls and rows[1].tool_calls[0]["function"]["name"] == "create_task"
    assert rows[3].external_id is not None  # the channel's receipt is stored


async def test_same_inbound_twice_is_answered_once(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(say("Hello there!"))  # a second call would be unscripted: the test fails
    msg = make_inbound("hi", message_id="tg-42")

    first = await app.dispatcher.handle(msg)
    again = await app.dispatcher.handle(make_inbound("hi", message_id="tg-42"))

    assert (first.status, again.status) == ("answered", "duplicate")
    assert channel(app).texts() == ["Hello there!"]
    assert len(fake_llm.chat_requests) == 1  # a greeting costs exactly one LLM call


async def test_unknown_sender_gets_a_pairing_code_and_no_agent_call(
    app: App, fake_llm: FakeLLM
) -> None:
    result = await app.dispatcher.handle(make_inbound("what's my schedule?", sender="stranger"))

    assert result.status == "pairing"
    assert fake_llm.requests == []
    [reply] = channel(app).texts()
    async with app.db.session() as s:
        [req] = (await s.exec(select(PairingRequest))).all()
        [stored] = (await s.exec(select(Message))).all()
    assert req.code in reply and len(req.code) == 8
    assert not set(req.code) & set("0O1IL")
    assert stored.text == "" and stored.user_id is None  # nothing of the stranger's text is kept

    # Asking again gives the same code, not a new one.
    await app.dispatcher.handle(make_inbound("hello?", sender="stranger"))
    assert req.code in channel(app).texts()[-1]


async def test_pairing_requests_are_one_per_sender_and_never_lock_newcomers_out(
    app: App,
) -> None:
    for i in range(5):
        for _again in range(3):
            await app.dispatcher.handle(make_inbound("hi", sender=f"s{i}"))
    await app.dispatcher.handle(make_inbound("hi", sender="newcomer"))
    assert "pairing code is" in channel(app).texts("newcomer")[-1]
    async with app.db.session() as s:
        assert len((await s.exec(select(PairingRequest))).all()) == 6


async def test_owner_approves_in_chat_and_the_stranger_is_welcomed(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app, "boss", owner=True)
    await app.dispatcher.handle(make_inbound("hi", sender="friend"))
    async with app.db.session() as s:
        [req] = (await s.exec(select(PairingRequest))).all()

    result = await app.dispatcher.handle(
        make_inbound(f"/approve {req.code.lower()}", sender="boss")
    )

    assert result.reply is not None and "Approved friend" in result.reply
    assert "You're approved" in channel(app).texts("friend")[-1]
    fake_llm.add(say("Hi friend!"))
    assert (
        await app.dispatcher.handle(make_inbound("hello", sender="friend"))
    ).status == "answered"


async def test_non_owner_cannot_approve(app: App) -> None:
    await add_user(app, "alice")
    await app.dispatcher.handle(make_inbound("hi", sender="mallory"))
    async with app.db.session() as s:
        [req] = (await s.exec(select(PairingRequest))).all()
    result = await app.dispatcher.handle(make_inbound(f"/approve {req.code}", sender="alice"))
    assert result.reply == "Only the owner can approve pairing codes."


async def test_linked_identities_share_facts(app: App, fake_llm: FakeLLM) -> None:
    other = RecordingChannelFactory.make(app, "other")
    await add_user(app, "ana")
    await app.dispatcher.handle(make_inbound("remember my cat is called Miso", sender="ana"))
    link = await app.dispatcher.handle(make_inbound("/link", sender="ana"))
    assert link.reply is not None
    code = link.reply.split("code is ")[1].split()[0]

    linked = await app.dispatcher.handle(make_inbound(code, sender="ana-other", channel="other"))
    assert linked.status == "linking"  # ana is asked first, in her first chat
    [yes, _no] = channel(app).sent[-1].buttons
    await app.dispatcher.handle(make_inbound("Yes", sender="ana", callback_data=yes.data))

    facts = await app.dispatcher.handle(make_inbound("/facts", sender="ana-other", channel="other"))
    assert facts.reply is not None and "my cat is called Miso" in facts.reply
    assert other.texts()[-1] == facts.reply
    assert fake_llm.requests == []


async def test_user_b_never_sees_user_a_facts(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app, "a")
    await add_user(app, "b")
    await app.dispatcher.handle(make_inbound("remember my PIN hint is blue horse", sender="a"))
    async with app.db.session() as s:
        [fact] = (await s.exec(select(Fact))).all()

    b_facts = await app.dispatcher.handle(make_inbound("/facts", sender="b"))
    assert b_facts.reply is not None and "blue horse" not in b_facts.reply
    b_forget = await app.dispatcher.handle(make_inbound(f"/forget {fact.id}", sender="b"))
    assert b_forget.reply == f"You have no fact #{fact.id}."

    # Through the agent's tools too: B's list_facts and forget_fact see nothing of A's.
    # (forget_fact first: after list_facts has been read it is not offered at all.)
    fake_llm.add(call("forget_fact", {"fact_id": fact.id}), call("list_facts", {}), say("done"))
    await app.dispatcher.handle(make_inbound("what facts do you know about me?", sender="b"))
    tool_results = [
        m["content"] for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "tool"
    ]
    assert tool_results[0].startswith("error: there is no fact")
    assert tool_results[1] == "no facts stored"
    async with app.db.session() as s:
        [still] = (await s.exec(select(Fact))).all()
    assert still.forgotten_at is None
    # The system prompt given for B's turn carries none of A's facts either.
    assert "blue horse" not in str(fake_llm.chat_requests[0]["messages"])


async def test_llm_outage_gives_plain_words_and_retry_answers_later(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(*[call("x")] * 0)
    from tests.fakes.llm import fail

    fake_llm.add(fail(500), fail(500), fail(500))
    down = await app.dispatcher.handle(make_inbound("what tasks do I have?"))
    assert down.status == "llm_down"
    assert "can't reach my language model" in channel(app).texts()[-1]
    assert "/retry" in channel(app).texts()[-1]

    fake_llm.add(say("Back online: ask me anything."))
    again = await app.dispatcher.handle(make_inbound("/retry"))
    assert again.status == "answered"
    assert channel(app).texts()[-1] == "Back online: ask me anything."
    assert fake_llm.chat_requests[-1]["messages"][-1]["content"] == "what tasks do I have?"
    nothing = await app.dispatcher.handle(make_inbound("/retry"))
    assert nothing.reply == "There is nothing waiting to be answered."


OVER_CONTEXT: dict[str, dict[str, object]] = {
    "openai": {
        "message": "This model's maximum context length is 8192 tokens. However, your "
        "messages resulted in 20112 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    },
    "llama.cpp": {
        "code": 400,
        "message": "request (20112 tokens) exceeds the available context size (8192 tokens)",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 20112,
        "n_ctx": 8192,
    },
}
"""What an endpoint answers when a request is longer than its model's window."""


@pytest.mark.parametrize("server", sorted(OVER_CONTEXT))
async def test_a_message_longer_than_the_models_window_is_answered_in_words_once(
    app: App, fake_llm: FakeLLM, server: str
) -> None:
    """It was "I can't reach my language model ... send /retry", and /retry failed alike."""
    from tests.fakes.llm import fail

    await add_user(app)
    fake_llm.add(fail(400, error=OVER_CONTEXT[server]))
    result = await app.dispatcher.handle(make_inbound("the whole of my thesis " * 4000))

    said = channel(app).texts()[-1]
    assert "more than my language model can read at once" in said, said
    assert "shorter parts" in said and "/retry" not in said
    assert len(fake_llm.chat_requests) == 1  # not retried: it would fail the same way
    assert result.status == "too_long"
    nothing = await app.dispatcher.handle(make_inbound("/retry"))
    assert nothing.reply == "There is nothing waiting to be answered."


async def test_runaway_tool_loop_stops_at_its_cap(app_factory, fake_llm: FakeLLM) -> None:
    from tests.fakes.llm import Step

    application = await app_factory(fake_llm, max_tool_rounds=3)
    application.dispatcher.register(RecordingChannelFactory.make(application, "fake"))
    await add_user(application)
    counter = iter(range(1000))
    fake_llm.default = lambda _body: Step(
        tool_calls=[("list_tasks", f'{{"include_done": {str(next(counter) % 2 == 0).lower()}}}')]
    )

    result = await application.dispatcher.handle(make_inbound("list my tasks forever"))

    assert result.reply is not None and "limit of 3 tool rounds" in result.reply
    assert len(fake_llm.chat_requests) == 4  # 3 rounds with tools, then one without


class RecordingChannelFactory:
    @staticmethod
    def make(application: App, name: str):
        from tests.fakes.channel import RecordingChannel

        ch = RecordingChannel(name)
        application.dispatcher.register(ch)
        return ch


async def test_a_group_message_never_becomes_the_push_address(app: App, fake_llm: FakeLLM) -> None:
    from storage.repos.users import UserRepo

    user = await add_user(app, "ana")
    fake_llm.add(say("hi in the group"))
    group = make_inbound("hello", sender="ana", chat="public-group")
    group.private = False
    await app.dispatcher.handle(group)
    async with app.db.session() as s:
        [ident] = await UserRepo(s).identities(user.id or 0)
    assert ident.chat_id == "ana"  # still the DM


async def test_a_crash_mid_turn_is_told_plainly_and_retry_answers_later(
    app: App, fake_llm: FakeLLM
) -> None:
    from pydantic import BaseModel

    from bot.agent.tools.base import Tool, ToolContext

    class NoArgs(BaseModel):
        pass

    broken = {"yes": True}

    async def flaky(_ctx: ToolContext, _args: NoArgs) -> str:
        if broken["yes"]:
            raise RuntimeError("bug in a tool")
        return "all good"

    app.tools.add(Tool("flaky", "A tool with a bug.", NoArgs, flaky, "Working…"))
    await add_user(app)
    fake_llm.add(call("flaky", {}))

    failed = await app.dispatcher.handle(make_inbound("check my tasks with flaky"))

    assert failed.status == "failed"
    assert "something went wrong on my side" in channel(app).texts()[-1]
    broken["yes"] = False
    fake_llm.add(call("flaky", {}), say("Everything is fine."))
    again = await app.dispatcher.handle(make_inbound("/retry"))
    assert again.reply == "Everything is fine."
    assert fake_llm.chat_requests[-1]["messages"][1]["content"] == "check my tasks with flaky"


async def test_a_task_too_long_is_refused_in_words_not_cut(app: App) -> None:
    """'/task add' with 3,000 characters kept the first 200 without a word."""
    await add_user(app)
    long_title = "call the plumber about the leak under the kitchen sink and " * 50
    refused = await app.dispatcher.handle(make_inbound(f"/task add {long_title}"))
    assert refused.reply is not None and "at most 200 characters" in refused.reply
    assert (await app.dispatcher.handle(make_inbound("/tasks"))).reply == "No open tasks."
    fits = await app.dispatcher.handle(make_inbound("/task add call the plumber"))
    assert fits.reply is not None and fits.reply.endswith(": call the plumber")


async def test_a_model_answer_no_database_stores_is_cleaned_not_lost(
    any_db_app: App, fake_llm: FakeLLM
) -> None:
    """A NUL from the model (PostgreSQL's text and JSON columns refuse it) failed the turn."""
    app = any_db_app
    await add_user(app)
    fake_llm.add(
        call("list_tasks", '{"include_done": false, "note": "a\\u0000b"}'),
        say("Nothing\x00 to do\ud800 today."),
    )
    result = await app.dispatcher.handle(make_inbound("what's on my list?"))
    assert result.status == "answered", result
    assert channel(app).texts()[-1] == "Nothing to do\ufffd today."  # half an emoji: U+FFFD
    # The whole turn is stored, and the next message is answered as usual.
    fake_llm.add(say("Hello again."))
    again = await app.dispatcher.handle(make_inbound("hi"))
    assert again.status == "answered" and channel(app).texts()[-1] == "Hello again."
