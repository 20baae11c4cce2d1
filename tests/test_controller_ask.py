"""Questions back, through dispatch: one question with buttons, resumed after a restart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bot.app.build import App
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound
from tests.support.jobs import deliveries, jobs_app, jobs_of, make_user
from tests.support.web import client_for, said, sign_in

ASK = {"question": "Which Ana?", "options": ["Ana Silva", "Ana from work"]}


async def _started(app_factory: AppFactory, fake_llm: FakeLLM, clock: ManualClock) -> App:
    app = await app_factory(fake_llm, clock=clock, ask_timeout_minutes=60)
    app.dispatcher.register(RecordingChannel("fake"))
    return app


async def _ask_which_ana(app: App, fake_llm: FakeLLM) -> list[tuple[str, str]]:
    fake_llm.add(call("ask_user", ASK))
    await app.dispatcher.handle(make_inbound("what did Ana say about the trip?"))
    sent = channel(app).sent[-1]
    assert sent.text == "Which Ana?"
    return [(b.label, b.data) for b in sent.buttons]


async def test_an_ambiguous_request_asks_once_and_resumes_after_a_restart(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(datetime(2030, 1, 7, 9, 0, tzinfo=UTC))
    first = await _started(app_factory, fake_llm, clock)
    await add_user(first)
    buttons = await _ask_which_ana(first, fake_llm)
    assert [label for label, _ in buttons] == ["Ana Silva", "Ana from work", "Other"]
    asked = len(fake_llm.chat_requests)
    await first.close()  # a restart while the question waits

    second = await _started(app_factory, fake_llm, clock)
    clock.advance(minutes=20)
    fake_llm.add(say("I found nothing from Ana Silva about the trip yet."))
    await second.dispatcher.handle(make_inbound("Ana Silva", callback_data=buttons[0][1]))

    assert channel(second).texts()[-1] == "I found nothing from Ana Silva about the trip yet."
    [resumed] = fake_llm.chat_requests[asked:]
    last = resumed["messages"][-1]["content"]
    assert "what did Ana say about the trip?" in last and "my answer: Ana Silva" in last
    assert any(m.get("content") == "Which Ana?" for m in resumed["messages"])  # the history

    again = await second.dispatcher.handle(make_inbound("x", callback_data=buttons[1][1]))
    assert again.reply == "You already answered that question."


async def test_other_asks_for_a_typed_answer_and_a_late_press_says_what_was_not_done(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(datetime(2030, 1, 7, 9, 0, tzinfo=UTC))
    app = await _started(app_factory, fake_llm, clock)
    await add_user(app)
    buttons = await _ask_which_ana(app, fake_llm)
    other = await app.dispatcher.handle(make_inbound("Other", callback_data=buttons[2][1]))
    assert other.reply == "Type your answer: Which Ana?"

    buttons = await _ask_which_ana(app, fake_llm)
    clock.advance(minutes=61)
    late = await app.dispatcher.handle(make_inbound("Ana", callback_data=buttons[0][1]))
    assert late.reply == (
        'That question timed out, so I did not go on with "what did Ana say about the trip?". '
        "Ask me again if you still want it."
    )


async def test_an_unanswered_question_is_followed_by_a_message_saying_what_was_not_done(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(datetime.now(UTC))  # messages are stamped when they arrive
    async with jobs_app(tmp_path, clock, fake_llm, ask_timeout_minutes=60) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        # Whatever the hour the test runs at: no quiet hours, and no morning briefing that
        # plan_and_send would otherwise send when the run happens to fall after 07:30 UTC.
        await make_user(app, "u1", quiet_start=None, briefing_enabled=False)
        buttons = await _ask_which_ana(app, fake_llm)
        clock.advance(minutes=30)
        await jobs_of(app).service.run_job("ask.timeouts")
        assert await deliveries(app, "ask_timeout") == []  # still waiting for the answer

        clock.advance(minutes=31)
        await jobs_of(app).service.run_job("ask.timeouts")
        await jobs_of(app).service.run_job("ask.timeouts")  # a second sweep tells nothing new
        [told] = await deliveries(app, "ask_timeout")
        await jobs_of(app).plan_and_send(clock.now())
        assert channel(app).texts()[-1] == (
            'I asked "Which Ana?" and got no answer. That question timed out, so I did not go '
            'on with "what did Ana say about the trip?". Ask me again if you still want it.'
        )
        late = await app.dispatcher.handle(make_inbound("Ana", callback_data=buttons[0][1]))
        assert late.reply is not None and late.reply.startswith("That question timed out")
        assert told.user_id is not None


async def test_the_web_page_shows_a_waiting_question_and_its_buttons_answer_it(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    clock = ManualClock(datetime.now(UTC))
    app = await _started(app_factory, fake_llm, clock)
    ann = await add_user(app)
    bob = await add_user(app, "bob")
    buttons = await _ask_which_ana(app, fake_llm)
    asked_id = int(buttons[0][1].split()[1])
    async with client_for(app) as web:
        csrf_bob = await sign_in(app, web, bob)
        assert "Which Ana?" not in (await web.get("/")).text
        stolen = await web.post(f"/questions/{asked_id}/0", data={"csrf": csrf_bob})
        assert "no longer waits" in await said(web, stolen)

        csrf = await sign_in(app, web, ann)
        page = (await web.get("/")).text
        assert f'id="question-{asked_id}"' in page and "Which Ana?" in page
        assert all(label in page for label in ("Ana Silva", "Ana from work", "Other"))
        fake_llm.add(say("I found nothing from Ana Silva about the trip yet."))
        done = await web.post(f"/questions/{asked_id}/0", data={"csrf": csrf})
        assert "note=Answered" in await said(web, done)
        assert channel(app).texts()[-1] == "I found nothing from Ana Silva about the trip yet."
        assert f'id="question-{asked_id}"' not in (await web.get("/")).text
