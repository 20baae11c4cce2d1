"""Proposed events: found in chats and pendant transcripts, asked with buttons, never doubled."""

# ruff: noqa: E501  (tables of cases read best one case per line)

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from sqlmodel import col, select

from bot.app.build import App
from storage.models import CalendarEvent, Message, Proposal, User
from storage.repos.calendar import CalendarRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, Step
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, jobs_of, make_user

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)  # Monday 13:00 in Lisbon

PLANS = {
    "coffee": {"title": "Coffee with Ana", "start": "2025-06-05T15:00", "place": "Blue Bottle", "people": ["Ana"]},
    "dinner": {"title": "Dinner with Bob", "start": "2025-06-06T20:00", "people": ["Bob"]},
    "lunch": {"title": "Lunch with Carla", "start": "2025-06-10T13:00", "people": ["Carla"]},
    "sync": {"title": "Team sync", "start": "2025-06-06T10:00", "end": "2025-06-06T10:30"},
    "dentist": {"title": "Dentist", "start": "2025-06-04T09:00", "place": "Rua Augusta"},
}  # fmt: skip


def llm_world(body: dict[str, Any]) -> Step:
    """The fast model finds the plan named in the message; the chat model just chats."""
    system = str(body["messages"][0]["content"])
    user = str(body["messages"][-1]["content"]).lower()
    if "concrete plans" in system:
        found = [plan for word, plan in PLANS.items() if word in user]
        return Step(text=json.dumps({"events": found}))
    if "Classify" in system:
        return Step(text='{"route": "chat"}')
    return Step(text="Sounds lovely!")


async def _say(app: App, text: str) -> None:
    await app.dispatcher.handle(make_inbound(text, sender="ana"))


async def _press(app: App, data: str) -> str:
    # As the Telegram and Slack adapters do: the button press carries its data as the text too.
    result = await app.dispatcher.handle(make_inbound(data, sender="ana", callback_data=data))
    assert result.reply is not None
    return result.reply


async def _events(app: App) -> list[CalendarEvent]:
    async with app.db.session() as s:
        return list((await s.exec(select(CalendarEvent).order_by(col(CalendarEvent.id)))).all())


async def _proposals(app: App) -> list[Proposal]:
    async with app.db.session() as s:
        return list((await s.exec(select(Proposal).order_by(col(Proposal.id)))).all())


@asynccontextmanager
async def ana_said(
    tmp_path: Path, fake_llm: FakeLLM, world: Callable[[dict[str, Any]], Step], text: str
) -> AsyncIterator[tuple[App, RecordingChannel, ManualClock]]:
    """Ana (in Lisbon) said ``text`` to a jobs app on ``world``; plans scanned and asked.

    Yields (app, her channel, the clock), still open for more.
    """
    fake_llm.default = world
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        await make_user(app, "ana", timezone="Europe/Lisbon")
        await _say(app, text)
        await jobs_of(app).proposals.scan(clock.now())
        await jobs_of(app).plan_and_send(clock.now())
        yield app, fake, clock


async def test_a_plan_in_chat_is_proposed_with_buttons_and_yes_adds_it_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    said = "let's have coffee Thursday at 3 at Blue Bottle, Ana"
    async with ana_said(tmp_path, fake_llm, llm_world, said) as (app, fake, clock):
        jobs = jobs_of(app)
        [question] = [m for m in fake.sent if m.kind == "proposal"]
        added = await _press(app, question.buttons[0].data)
        again = await _press(app, question.buttons[0].data)  # a double tap
        # The same plan mentioned again is not proposed again: it is in the calendar.
        await _say(app, "see you Thursday at 3 for coffee!")
        await jobs.proposals.scan(clock.now())
        await jobs.plan_and_send(clock.now())
        events = await _events(app)

    assert question.text == (
        "Add to your calendar? Coffee with Ana at Blue Bottle: Thu 5 Jun 15:00-16:00, with Ana "
        "(from our chat)."
    )
    assert [(b.label, b.data) for b in question.buttons] == [
        ("Yes", "/proposal yes 1"),
        ("No", "/proposal no 1"),
    ]
    assert added == "Added: #1 Thu 5 Jun 15:00-16:00 Coffee with Ana (Blue Bottle; with Ana)"
    assert again == "Coffee with Ana is already in your calendar."
    assert len([m for m in fake.sent if m.kind == "proposal"]) == 1
    assert [(e.title, e.start_at) for e in events] == [
        ("Coffee with Ana", datetime(2025, 6, 5, 14, 0, tzinfo=UTC))
    ]


async def test_a_plan_whose_fields_the_model_gave_in_odd_shapes_is_proposed_in_words_or_not_at_all(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """ "people": "Ana" was read letter by letter ("with A, n, a"); a place or a title given as an
    object was shown as its JSON ("{'name': ...}"); a people number failed the scan."""
    odd = [
        {
            "title": "Coffee with Ana",
            "start": "2025-06-05T15:00",
            "people": "Ana",
            "place": {"name": "Blue Bottle"},
        },
        {"title": {"text": "Dinner"}, "start": "2025-06-06T20:00"},
        {"title": 42, "start": "2025-06-07T20:00"},
        {"title": "Team sync", "start": "2025-06-06T10:00", "people": 3},
    ]

    def world(body: dict[str, Any]) -> Step:
        if "concrete plans" in str(body["messages"][0]["content"]):
            return Step(text=json.dumps({"events": odd}))
        return llm_world(body)

    said = "coffee Thursday at 3 with Ana, and the team sync Friday at 10"
    async with ana_said(tmp_path, fake_llm, world, said) as (_, fake, _):
        pass
    asked = sorted(m.text for m in fake.sent if m.kind == "proposal")
    assert asked == [
        "Add to your calendar? Coffee with Ana: Thu 5 Jun 15:00-16:00, with Ana (from our chat).",
        "Add to your calendar? Team sync: Fri 6 Jun 10:00-11:00 (from our chat).",
    ]


async def test_no_dismisses_and_unanswered_proposals_expire(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.default = llm_world
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana", timezone="Europe/Lisbon")
        jobs = jobs_of(app)
        await _say(app, "dinner with Bob on Friday at 8pm?")
        await _say(app, "lunch with Carla next Tuesday at 1pm")
        await jobs.proposals.scan(clock.now())
        declined = await _press(app, "/proposal no 1")
        # Lunch is never answered: it expires at its start (sooner than 7 days).
        clock.set(datetime(2025, 6, 10, 12, 1, tzinfo=UTC))
        await jobs.plan_and_send(clock.now())
        late = await _press(app, "/proposal yes 2")
        proposals = await _proposals(app)
        events = await _events(app)

    assert declined == "OK, I won't add Dinner with Bob."
    assert late.startswith("The proposal for Lunch with Carla has expired")
    assert [p.status for p in proposals] == ["declined", "expired"]
    assert events == []


async def test_a_proposal_expires_after_7_days(tmp_path: Path, fake_llm: FakeLLM) -> None:
    clock = ManualClock(NOW)
    fake_llm.default = llm_world
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        await make_user(app, "ana", timezone="Europe/Lisbon")
        jobs = jobs_of(app)
        # A plan a month away: the 7-day limit applies.
        PLANS["party"] = {"title": "Party", "start": "2025-07-05T21:00"}
        try:
            await _say(app, "party on July 5 at 9pm")
            await jobs.proposals.scan(clock.now())
        finally:
            del PLANS["party"]
        await jobs.proposals.expire(clock.advance(days=6, hours=23))
        assert [p.status for p in await _proposals(app)] == ["pending"]
        await jobs.proposals.expire(clock.advance(hours=1))
        assert [p.status for p in await _proposals(app)] == ["expired"]


async def test_yes_merges_with_an_event_of_the_same_title_within_an_hour(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.default = llm_world
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        app.dispatcher.register(RecordingChannel("fake"))
        user = await make_user(app, "ana", timezone="Europe/Lisbon")
        jobs = jobs_of(app)
        await _say(app, "team sync moved to friday at 10")
        await jobs.proposals.scan(clock.now())
        # Meanwhile the same meeting lands in the calendar another way, half an hour later.
        async with app.db.session() as s:
            await CalendarRepo(s).add_or_merge(
                user.id or 0,
                title="The team sync",
                start=datetime(2025, 6, 6, 9, 30, tzinfo=UTC),
                end=datetime(2025, 6, 6, 10, 0, tzinfo=UTC),
                place="Room 2",
                people=["Bea"],
                source="manual",
                now=clock.now(),
            )
        merged = await _press(app, "/proposal yes 1")
        events = await _events(app)

    assert merged.startswith("It was already in your calendar; I updated it: #1")
    assert len(events) == 1
    assert events[0].place == "Room 2"


async def test_plans_heard_by_the_pendant_are_proposed_too(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.default = llm_world
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        fake = RecordingChannel("fake")
        app.dispatcher.register(fake)
        user = await make_user(app, "ana", timezone="Europe/Lisbon")
        async with app.db.session() as s:
            s.add(
                Message(
                    user_id=user.id,
                    direction="in",
                    role="user",
                    channel="device",
                    account="pendant",
                    chat_id="ambient",
                    sender_id="pendant",
                    text="so the dentist is Wednesday at nine on Rua Augusta",
                    status="stored",
                    created_at=clock.now() - timedelta(minutes=5),
                )
            )
        await jobs_of(app).proposals.scan(clock.now())
        await jobs_of(app).plan_and_send(clock.now())
        [proposal] = await _proposals(app)
    assert proposal.source == "pendant"
    assert [m.text for m in fake.sent if m.kind == "proposal"] == [
        "Add to your calendar? Dentist at Rua Augusta: Wed 4 Jun 09:00-10:00 (from something you said)."
    ]


async def test_an_ics_export_has_every_event(tmp_path: Path) -> None:
    from bot.jobs.calendars.events import to_ics

    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock) as app:
        user = await make_user(app, "ana")
        async with app.db.session() as s:
            repo = CalendarRepo(s)
            await repo.add_or_merge(
                user.id or 0,
                title="Coffee, with Ana; and a very long title " + "x" * 80,
                start=datetime(2025, 6, 5, 14, 0, tzinfo=UTC),
                end=datetime(2025, 6, 5, 15, 0, tzinfo=UTC),
                place="Blue Bottle",
                people=["Ana"],
                source="chat",
                now=clock.now(),
            )
            events = await repo.all_events(user.id or 0)
    ics = to_ics(events, name="ana", now=clock.now(), tz=ZoneInfo("Europe/Lisbon"))
    lines = ics.split("\r\n")
    assert lines[0] == "BEGIN:VCALENDAR" and lines[-2] == "END:VCALENDAR"
    assert all(len(line.encode()) <= 75 for line in lines)
    unfolded = ics.replace("\r\n ", "")
    assert "SUMMARY:Coffee\\, with Ana\\; and a very long title " in unfolded
    assert "DTSTART:20250605T140000Z" in unfolded and "LOCATION:Blue Bottle" in unfolded


async def test_an_all_day_event_is_exported_as_a_day_not_a_24_hour_meeting(tmp_path: Path) -> None:
    from bot.jobs.calendars.events import to_ics
    from bot.jobs.calendars.ics import read_ics

    berlin = ZoneInfo("Europe/Berlin")
    imported = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
        "UID:holiday-1\r\nDTSTAMP:20250101T000000Z\r\nDTSTART;VALUE=DATE:20250605\r\n"
        "DTEND;VALUE=DATE:20250607\r\nSUMMARY:Long weekend\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock) as app:
        user = await make_user(app, "ana")
        async with app.db.session() as s:  # the person's zone decides which days those are
            stored = await s.get(User, user.id)
            assert stored is not None
            stored.timezone = "Europe/Berlin"
            s.add(stored)
        user.timezone = "Europe/Berlin"
        await app.jobs.calendars.import_file(user, imported.encode())
        async with app.db.session() as s:
            events = await CalendarRepo(s).all_events(user.id or 0)
    [outside] = read_ics(
        imported, berlin, NOW - timedelta(days=400), NOW + timedelta(days=400)
    ).events
    ics = to_ics(events, now=clock.now(), tz=berlin)
    assert "DTSTART;VALUE=DATE:20250605" in ics
    assert "DTEND;VALUE=DATE:20250607" in ics
    # Read back as any calendar app would: the same two whole days.
    [again] = read_ics(ics, berlin, NOW - timedelta(days=400), NOW + timedelta(days=400)).events
    assert again.all_day
    assert (again.start, again.end) == (outside.start, outside.end)
