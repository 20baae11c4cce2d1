"""Buttons on a pendant: a proposed event is asked in words and answered by saying yes or no."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlmodel import select
from websockets.asyncio.client import ClientConnection, connect

from bot.device.choices import SpokenChoices, matches, spoken_prompt
from bot.messages import Button
from storage.models import CalendarEvent
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, Step, call, say
from tests.support.device import add_device, running_device
from tests.support.jobs import jobs_app, jobs_of
from tests.support.speech import shared_transcriber

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)  # a Monday


def world(body: dict[str, Any]) -> Step:
    system = str(body["messages"][0]["content"])
    if "concrete plans" in system:
        plan = {"title": "Coffee with Ana", "start": "2025-06-05T15:00", "people": ["Ana"]}
        return Step(text=json.dumps({"events": [plan]}))
    if "Classify" in system:
        return Step(text='{"route": "chat"}')
    return Step(text="Sounds lovely!")


async def next_reply(ws: ClientConnection) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            frame: dict[str, Any] = json.loads(await ws.recv())
            if frame["type"] == "reply":
                return frame


async def test_saying_yes_accepts_a_proposed_event(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.default = world
    clock = ManualClock(NOW)
    async with jobs_app(tmp_path, clock, fake_llm) as app:
        user, token = await add_device(app, "pendant-1")
        async with running_device(app, transcriber=shared_transcriber()) as dev:
            headers = {"Authorization": f"Bearer {token}"}
            async with connect(dev.url, additional_headers=headers, proxy=None) as ws:
                hello = {"type": "hello", "codec": "pcm16", "sample_rate": 16000,
                         "channels": 1, "mode": "ask"}  # fmt: skip
                await ws.send(json.dumps(hello))
                text = {"type": "text", "text": "let's have coffee with Ana on Thursday at 3"}
                await ws.send(json.dumps(text))
                assert (await next_reply(ws))["text"] == "Sounds lovely!"

                jobs = jobs_of(app)
                await jobs.proposals.scan(clock.now())
                await jobs.plan_and_send(clock.now())
                question = await next_reply(ws)
                await ws.send(json.dumps({"type": "text", "text": "Yes, please!"}))
                answer = await next_reply(ws)
        async with app.db.session() as s:
            events = (await s.exec(select(CalendarEvent))).all()

    assert question["kind"] == "proposal"
    assert question["text"].endswith("(Say Yes or No.)")
    assert [b["label"] for b in question["buttons"]] == ["Yes", "No"]
    assert answer["text"].startswith("Added: #1")
    assert [(e.title, e.user_id) for e in events] == [("Coffee with Ana", user.id)]


def test_only_the_next_utterance_can_answer() -> None:
    choices = SpokenChoices()
    buttons = [Button("Yes", "/proposal yes 7"), Button("No", "/proposal no 7")]
    choices.offer("p1", buttons)
    assert choices.take("p2", "yes") is None  # another device
    assert choices.take("p1", "what time is it?") is None
    assert choices.take("p1", "yes") is None  # the offer ended with the unrelated question
    choices.offer("p1", buttons)
    assert choices.take("p1", "Nope.") == "/proposal no 7"


def test_spoken_answers_match_labels_and_their_synonyms() -> None:
    assert matches("Yes", "Yeah!")
    assert matches("No", "no thank you")
    assert matches("Later", "later.")
    assert not matches("Yes", "yesterday")
    assert (
        spoken_prompt([Button("A", "a"), Button("B", "b"), Button("C", "c")]) == "(Say A, B or C.)"
    )


async def test_a_question_back_is_read_out_and_answered_by_voice(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    agent_steps = [
        call("ask_user", {"question": "Which Ana?", "options": ["Ana Silva", "Ana from work"]}),
        say("I found nothing from Ana Silva about the trip yet."),
    ]

    def respond(body: dict[str, Any]) -> Step:
        system = str(body["messages"][0]["content"])
        if "concrete plans" in system:
            return Step(text='{"events": []}')
        if body.get("model") == "fake-fast":
            return Step(text="{}")
        return agent_steps.pop(0)

    fake_llm.default = respond
    async with jobs_app(tmp_path, ManualClock(NOW), fake_llm) as app:
        _, token = await add_device(app, "pendant-1")
        async with running_device(app, transcriber=shared_transcriber()) as dev:
            headers = {"Authorization": f"Bearer {token}"}
            async with connect(dev.url, additional_headers=headers, proxy=None) as ws:
                hello = {"type": "hello", "codec": "pcm16", "sample_rate": 16000,
                         "channels": 1, "mode": "ask"}  # fmt: skip
                await ws.send(json.dumps(hello))
                await ws.send(
                    json.dumps({"type": "text", "text": "what did Ana say about the trip?"})
                )
                question = await next_reply(ws)
                await ws.send(json.dumps({"type": "text", "text": "Ana Silva."}))
                answer = await next_reply(ws)

    assert question["text"] == "Which Ana? (Say Ana Silva, Ana from work or Other.)"
    assert [b["label"] for b in question["buttons"]] == ["Ana Silva", "Ana from work", "Other"]
    assert answer["text"] == "I found nothing from Ana Silva about the trip yet."
    assert agent_steps == []
