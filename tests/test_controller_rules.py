"""Hard rules vs soft facts, through dispatch: stored apart, always prompted, checked by code."""

from __future__ import annotations

from sqlmodel import select

from bot.agent.rules import is_rule, time_rule
from bot.app.build import App
from storage.models import CalendarEvent, Reminder
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


async def _events(app: App) -> list[CalendarEvent]:
    async with app.db.session() as s:
        return list((await s.exec(select(CalendarEvent))).all())


async def test_a_rule_is_kept_apart_prompted_and_blocks_an_event_at_nine(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    await app.dispatcher.handle(make_inbound("remember never book meetings before 10"))
    await app.dispatcher.handle(make_inbound("remember my sister is Ana"))

    facts = (await app.dispatcher.handle(make_inbound("/facts"))).reply or ""
    assert facts.index("Rules (always followed):") < facts.index("never book meetings before 10")
    assert facts.index("never book meetings before 10") < facts.index("Facts:")
    assert facts.index("Facts:") < facts.index("my sister is Ana")

    fake_llm.add(
        call("add_event", {"title": "Sync with Ana", "start": "2030-05-06T09:00"}),
        say("That time breaks a rule of yours, so I did not book it. Shall I try 10:00?"),
    )
    ask = "put a meeting with Ana in my calendar on 6 May 2030 at 9"
    await app.dispatcher.handle(make_inbound(ask))
    system = fake_llm.chat_requests[-2]["messages"][0]["content"]
    assert "hard rules" in system and "never book meetings before 10" in system
    refusal = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert refusal.startswith("error: not done: 09:00 breaks the user's rule")
    assert await _events(app) == []
    assert "did not book it" in channel(app).texts()[-1]

    fake_llm.add(
        call("add_event", {"title": "Sync with Ana", "start": "2030-05-06T10:30"}),
        say("Booked for 10:30."),
    )
    await app.dispatcher.handle(make_inbound("then put it in my calendar at 10:30"))
    assert [e.title for e in await _events(app)] == ["Sync with Ana"]


def test_which_sentences_are_rules_and_what_they_allow() -> None:
    assert is_rule("never book meetings before 10")
    assert is_rule("I don't eat pork")
    assert not is_rule("my sister is Ana")
    rule = time_rule("never book meetings before 10")
    assert rule is not None and rule.not_before is not None and rule.not_before.hour == 10
    late = time_rule("no meetings after 6pm")
    assert late is not None and late.not_after is not None and late.not_after.hour == 18
    assert time_rule("I don't eat pork") is None


async def test_a_rule_about_reminders_blocks_a_reminder_at_a_forbidden_time(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    await app.dispatcher.handle(make_inbound("remember never send me reminders after 9pm"))
    assert time_rule("never book meetings before 10", reminders=True) is None  # events only

    fake_llm.add(
        call("set_reminder", {"request": "tomorrow at 11pm to water the plants"}),
        say("That time breaks your rule, so I set nothing. Shall I make it 8pm?"),
    )
    await app.dispatcher.handle(make_inbound("remind me tomorrow at 11pm to water the plants"))
    refusal = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert refusal.startswith("error: not done: 23:00 breaks the user's rule")
    assert "Do not set this reminder" in refusal
    assert await _reminders(app) == []

    fake_llm.add(
        call("set_reminder", {"request": "tomorrow at 8pm to water the plants"}),
        say("Done: tomorrow at 20:00."),
    )
    await app.dispatcher.handle(make_inbound("then remind me at 8pm"))
    assert [r.text for r in await _reminders(app)] == ["water the plants"]


async def _reminders(app: App) -> list[Reminder]:
    async with app.db.session() as s:
        return list((await s.exec(select(Reminder))).all())
