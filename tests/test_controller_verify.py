"""The check before answering: ungrounded answers are caught and repaired, or made plain."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.agent.sources import SourceLedger
from bot.agent.verify import check_answer
from bot.app.build import App
from storage.models import MemoryItem
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, Step, call, say
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound


async def _plant(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.default = lambda _body: say("Noted.")  # the router's guess, then the chat reply
    await app.dispatcher.handle(make_inbound("Booked the dentist for Friday at 9:30"))
    fake_llm.default = None


async def test_an_answer_citing_a_source_that_does_not_say_it_is_repaired(
    app: App, fake_llm: FakeLLM
) -> None:
    await _plant(app, fake_llm)
    fake_llm.add(
        call("search_memory", {"query": "dentist"}),
        say("Your dentist appointment was moved to Monday at noon [1]."),  # [1] says Friday
        say("Your dentist appointment is on Friday at 9:30 [1]."),
    )
    await app.dispatcher.handle(make_inbound("when is my dentist appointment?"))
    sent = channel(app).sent[-1]
    assert sent.text == "Your dentist appointment is on Friday at 9:30 [1]."
    assert [c.index for c in sent.citations] == [1]
    note = fake_llm.chat_requests[-1]["messages"][-1]
    assert note["role"] == "system" and "moved to Monday" in note["content"]
    assert app.agent.verifier_fired == 1


async def test_an_answer_with_no_tool_behind_it_says_plainly_what_is_not_known(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    fake_llm.add(
        say("You went running 12 times in March."),  # no tool called: nothing behind it
        say("You ran 12 times in March, as usual."),  # the repair still cites nothing
    )
    await app.dispatcher.handle(make_inbound("how often did I go running in March?"))
    text = channel(app).texts()[-1]
    assert "12" not in text
    assert text.startswith("I don't know")


async def test_a_grounded_answer_goes_out_untouched_with_no_extra_call(
    app: App, fake_llm: FakeLLM
) -> None:
    await _plant(app, fake_llm)
    fake_llm.add(
        call("search_memory", {"query": "dentist"}),
        say("Your dentist appointment is on Friday at 9:30 [1]."),
    )
    before = len(fake_llm.chat_requests)
    await app.dispatcher.handle(make_inbound("when is my dentist appointment?"))
    assert channel(app).texts()[-1] == "Your dentist appointment is on Friday at 9:30 [1]."
    assert len(fake_llm.chat_requests) - before == 2
    assert app.agent.verifier_fired == 0


async def test_the_fast_model_judges_when_configured(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm, verify_with_model=True)
    app.dispatcher.register(RecordingChannel("fake"))
    await _plant(app, fake_llm)
    fake_llm.add(
        call("search_memory", {"query": "dentist"}),
        say("Your dentist appointment is on Friday at 9:30 [1], with Dr Ames."),
        Step(text='{"grounded": false, "claim": "with Dr Ames"}'),
        say("Your dentist appointment is on Friday at 9:30 [1]."),
        Step(text='{"grounded": true}'),
    )
    await app.dispatcher.handle(make_inbound("when is my dentist appointment?"))
    assert channel(app).texts()[-1] == "Your dentist appointment is on Friday at 9:30 [1]."


def _ledger(*snippets: str) -> SourceLedger:
    ledger = SourceLedger()
    for i, snippet in enumerate(snippets, start=1):
        ledger.add(
            MemoryItem(user_id=1, kind="message", source_id=i, text=snippet, ts=datetime.now(UTC))
        )
    return ledger


GOOD = [
    (
        "Your dentist appointment is on Friday at 9:30 [1].",
        ["Booked the dentist for Friday at 9:30"],
        [],
    ),
    ("You ran 3 times in March.", [], ["3 runs in March 2026: 02 Mar, 09 Mar, 30 Mar"]),
    ("You ran in the park with Ana [2].", ["ran 5k", "ran in the park with Ana"], []),
    ("I don't know; I have nothing about a scuba trip.", [], ["No sources found."]),
    ("You have no tasks.", [], ["no tasks"]),
    ("You said Ana moved to Porto [1].", ["Ana moved to Porto last spring"], []),
    ("Added.", [], ["created task #1: buy milk"]),
    ("Your next reminder is at 18:00: call mum.", [], ["#4 18:00 call mum"]),
    ("Sure, what would you like to plan?", [], []),
]
BAD = [
    ("You went running 12 times in March.", [], []),
    (
        "Your dentist appointment was moved to Monday [1].",
        ["Booked the dentist for Friday at 9:30"],
        [],
    ),
    ("You told Ana you would visit Lisbon.", ["Ana moved to Porto last spring"], []),
    ("Your sister's birthday is on 4 May [1].", ["Bought bread and eggs"], []),
    ("You met Jordan at the gym yesterday.", [], ["no tasks"]),
]


def test_how_often_the_rules_fire_on_a_scripted_set() -> None:
    fired_good = [a for a, s, r in GOOD if not check_answer(a, _ledger(*s), r).ok]
    fired_bad = [a for a, s, r in BAD if not check_answer(a, _ledger(*s), r).ok]
    print(
        f"verifier fired on {len(fired_bad)}/{len(BAD)} bad answers and "
        f"{len(fired_good)}/{len(GOOD)} good ones"
    )
    assert fired_good == []
    assert len(fired_bad) == len(BAD)
