"""/new, through dispatch: the model no longer sees the messages before it."""

from __future__ import annotations

import json

from bot.app.build import App
from storage.repos.messages import MessageRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, Step, say
from tests.support.app import AppFactory, add_user
from tests.support.builders import make_inbound


async def test_new_starts_a_fresh_context(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(say("Noted, the kayak is blue."))
    await app.dispatcher.handle(make_inbound("my kayak notes: the kayak is blue"))
    reply = (await app.dispatcher.handle(make_inbound("/new"))).reply or ""
    assert reply.startswith("Fresh start")

    fake_llm.add(say("Here are your tasks."))
    await app.dispatcher.handle(make_inbound("list my tasks please"))
    sent = json.dumps(fake_llm.chat_requests[-1]["messages"])
    assert "kayak" not in sent and "/new" not in sent
    assert fake_llm.chat_requests[-1]["messages"][-1]["content"] == "list my tasks please"


async def test_new_with_a_title_names_the_thread_and_threads_lists_it(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(say("Noted."))
    await app.dispatcher.handle(make_inbound("my garden shed roof needs planning this weekend"))
    reply = (await app.dispatcher.handle(make_inbound("/new Trip to Porto"))).reply or ""
    assert 'New thread: "Trip to Porto"' in reply

    listed = (await app.dispatcher.handle(make_inbound("/threads"))).reply or ""
    assert "Trip to Porto" in listed and "(here)" in listed
    # The chat's thread was renamed by /new: the garden title is gone with the old context.
    assert "garden" not in listed


async def test_a_thread_is_named_from_its_first_words_without_a_model_call(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(say("Sure."))
    await app.dispatcher.handle(make_inbound("Help me plan my sister's birthday party next month"))
    listed = (await app.dispatcher.handle(make_inbound("/threads"))).reply or ""
    assert "Help me plan my sister's birthday" in listed
    assert len(fake_llm.chat_requests) == 1  # the answer only: no title call


async def test_older_turns_of_a_long_thread_are_summarised_not_cut(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm, history_messages=4)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app)
    said = [
        "my bike lock code is in the blue notebook",
        "my dentist moved to Friday afternoon",
        "my tea box is empty again",
        "what is a good name for my cat",
    ]
    for text in said:
        fake_llm.add(say(f"Okay: {text.split()[1]}."))
        await app.dispatcher.handle(make_inbound(text))
    fake_llm.add(say("Here you go."))
    await app.dispatcher.handle(make_inbound("and what did I say first?"))

    messages = fake_llm.chat_requests[-1]["messages"]
    system = messages[0]["content"]
    assert "Earlier in this conversation" in system
    assert "bike lock code is in the blue notebook" in system  # summarised, not lost
    # The history window (a sure memory question also carries its search, run first).
    window = [m["content"] for m in messages[1:] if m["role"] != "tool" and not m.get("tool_calls")]
    assert len(window) == 4 and window[-1] == "and what did I say first?"
    assert not any("bike lock" in str(m) for m in window)  # not repeated in full


async def _fast_model_threads(app_factory: AppFactory, fake_llm: FakeLLM) -> App:
    """An app with one user whose threads the fast model names and summarises (window: 2)."""
    app = await app_factory(fake_llm, history_messages=2, threads_with_model=True)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app)
    return app


async def test_with_the_fast_model_titles_and_summaries_come_from_it(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await _fast_model_threads(app_factory, fake_llm)

    def answer(body: dict[str, object]) -> Step:
        content = json.dumps(body["messages"])
        if body["model"] != "fake-fast":
            return say("Okay.")
        if "Name this conversation" in content:
            return say("Bike lock notes")
        assert "Summary so far" in content, content  # no other fast-model call is expected
        return say("- The user keeps the bike lock code in a notebook.")

    fake_llm.default = answer
    await app.dispatcher.handle(make_inbound("my bike lock code is in the blue notebook"))
    assert fake_llm.chat_requests[0]["model"] == "fake-fast"
    for text in ("my dentist moved to Friday", "my tea box is empty", "my car needs tyres"):
        await app.dispatcher.handle(make_inbound(text))
    # A few rows past the window so far: shown as said, no summary call yet.
    assert [r["model"] for r in fake_llm.chat_requests].count("fake-fast") == 1
    await app.dispatcher.handle(make_inbound("my mum calls on Sunday"))

    summary_call, answer_call = fake_llm.chat_requests[-2:]
    assert summary_call["model"] == "fake-fast"
    assert "bike lock code is in the blue notebook" in json.dumps(summary_call["messages"])
    assert "keeps the bike lock code in a notebook" in answer_call["messages"][0]["content"]
    listed = (await app.dispatcher.handle(make_inbound("/threads"))).reply or ""
    assert "Bike lock notes" in listed


async def test_a_turn_that_pushed_many_rows_out_of_the_window_is_summarised_whole(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    # A turn reads only the window and a few rows before it when the thread's summary is up
    # to date (#22); a tool-heavy turn pushes more out than that, and none may be lost.
    app = await app_factory(fake_llm, history_messages=4)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app)
    fake_llm.default = lambda _body: say("Okay.")
    for n in range(4):  # the thread outgrows the window: it has a summary now
        first = await app.dispatcher.handle(make_inbound(f"plain line number {n}"))
    assert first.turn is not None
    async with app.db.session() as s:  # what a tool-using turn leaves: many rows at once
        for n in range(14):
            await MessageRepo(s).add(
                first.turn.user_id,
                first.turn.conversation_id,
                role="assistant",
                text=f"step {n} of a long answer.",
            )
    await app.dispatcher.handle(make_inbound("and now?"))
    await app.dispatcher.handle(make_inbound("and then?"))

    system = [str(r["messages"][0]["content"]) for r in fake_llm.chat_requests][-1]
    assert "Earlier in this conversation" in system
    assert "plain line number 0" in system
    assert all(f"step {n} of a long answer" in system for n in range(13))


async def test_a_long_thread_asks_the_fast_model_to_summarise_a_few_turns_at_a_time(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    # Every turn past the window used to ask the fast model for a new summary before the
    # answer (a model call and its wait per message); now the rows that left the window are
    # folded in a few turns at a time, and until then they are shown as they were said.
    app = await _fast_model_threads(app_factory, fake_llm)
    summaries: list[str] = []

    def answer(body: dict[str, object]) -> Step:
        system = str(body["messages"][0]["content"])  # type: ignore[index]
        if body["model"] != "fake-fast":
            return say("Okay.")
        if system.startswith("Name this conversation"):
            return say("Notes")
        newer = str(body["messages"][1]["content"]).split("Newer messages:\n", 1)[1]  # type: ignore[index]
        summaries.append(newer)
        before = str(body["messages"][1]["content"]).split("Summary so far:\n", 1)[1]  # type: ignore[index]
        kept = before.split("\n\nNewer messages:", 1)[0].replace("(none)", "").strip()
        return say("\n".join(part for part in (kept, newer) if part))

    fake_llm.default = answer
    said = [f"note number {n} is about topic {n}" for n in range(9)]
    for text in said:
        await app.dispatcher.handle(make_inbound(text))

    assert 1 <= len(summaries) <= 3, summaries  # was one per turn from the second on: 8
    answers = [r for r in fake_llm.chat_requests if r["model"] != "fake-fast"]
    for n, request in enumerate(answers):
        prompt = json.dumps(request["messages"])
        # Every earlier note reaches the model: in the summary, as a line, or in the window.
        missing = [text for text in said[:n] if text not in prompt]
        assert not missing, (n, missing)
