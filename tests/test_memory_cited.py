"""Cited answers end to end: numbered sources, citations on the reply, "why?", /sources,
invented citation numbers dropped, and "I don't know" material when nothing is stored."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlmodel import col, select

from bot.agent.memory.service import MemoryService
from bot.app.build import App
from storage.models import Message
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


async def test_answer_cites_its_sources_and_why_shows_them(app: App, fake_llm: FakeLLM) -> None:
    user = await add_user(app)
    assert user.id is not None
    fake_llm.default = lambda body: say("Noted.")
    await app.dispatcher.handle(make_inbound("Booked the dentist for Friday at 9:30"))
    fake_llm.add(
        call("search_memory", {"query": "dentist appointment"}),
        say("Your dentist appointment is on Friday at 9:30 [1]. Bring the X-rays [7]."),
    )
    result = await app.dispatcher.handle(make_inbound("when is my dentist appointment?"))

    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert "[1]" in tool_result and "Booked the dentist" in tool_result
    sent = channel(app).sent[-1]
    # [7] was never given by a tool: an invented source is removed, not shown.
    assert sent.text == "Your dentist appointment is on Friday at 9:30 [1]. Bring the X-rays ."
    [cite] = sent.citations
    assert (cite.index, cite.kind, cite.channel) == (1, "message", "fake")
    assert "Booked the dentist" in cite.snippet and isinstance(cite.ts, datetime)
    async with app.db.session() as s:
        reply = (
            await s.exec(
                select(Message).where(Message.direction == "out").order_by(col(Message.id).desc())
            )
        ).first()
    assert reply is not None and reply.citations and reply.citations[0]["index"] == 1
    assert result.status == "answered"

    calls_before = len(fake_llm.chat_requests)
    why = await app.dispatcher.handle(make_inbound("why?"))
    assert why.reply is not None and "[1]" in why.reply and "Booked the dentist" in why.reply
    slash = await app.dispatcher.handle(make_inbound("/sources"))
    assert slash.reply is not None and "Booked the dentist" in slash.reply
    assert len(fake_llm.chat_requests) == calls_before  # no model needed for either

    # The question itself was a query, not a memory: it never comes back as evidence.
    memory: MemoryService = app.memory
    out = await memory.retriever.search(
        user.id, "dentist appointment", now=datetime.now(UTC), tz=ZoneInfo("UTC")
    )
    assert [e.item.text for e in out.evidence] == ["Booked the dentist for Friday at 9:30"]


async def test_nothing_stored_gives_the_model_nothing_to_cite(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(
        call("search_memory", {"query": "scuba diving trip"}),
        say("I don't know; I have nothing about a scuba trip."),
    )
    await app.dispatcher.handle(make_inbound("when was my scuba diving trip?"))
    tool_result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert tool_result.startswith("No sources found.") and "don't know" in tool_result
    assert channel(app).sent[-1].citations == []
    why = await app.dispatcher.handle(make_inbound("why?"))
    assert why.reply == "My last answer didn't rely on anything stored in your memory."
