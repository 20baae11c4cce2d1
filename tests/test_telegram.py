"""The Telegram channel end to end: real python-telegram-bot against the fake Bot API server."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from bot.adapters.telegram.adapter import STALE_BUTTON, TelegramAdapter, TelegramConfig
from bot.app.build import App
from bot.app.doctor import check_telegram
from bot.clock import SystemClock
from bot.errors import ChannelError, RateLimited
from bot.messages import Address, Button, OutboundMessage
from storage.models import ChannelIdentity, Conversation, Message
from tests.fakes.llm import FakeLLM, Step, say
from tests.fakes.telegram_api import BOT_ID, BOT_USERNAME, TOKEN, FakeTelegram
from tests.fakes.telegram_html import utf16_len
from tests.support.app import make_settings
from tests.support.telegram import CHAT, Starter, eventually, voice_note

ADDRESS = Address("telegram", str(BOT_ID), str(CHAT))


def answer_with(llm: FakeLLM, text: str | Callable[[dict[str, Any]], str]) -> None:
    """Every agent turn answers ``text``; the router's classification says "chat"."""

    def respond(body: dict[str, Any]) -> Step:
        if "Classify the user's message" in str(body["messages"][0]["content"]):
            return say('{"route": "chat"}')
        return say(text(body) if callable(text) else text)

    llm.default = respond


def last_user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def agent_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    """Chat requests of agent turns (not the router's classification, nor the calendar-plan
    finder, which runs beside a turn and may come after it)."""
    side_tasks = ("Classify the user's message", "You find concrete plans")
    return [
        r
        for r in llm.chat_requests
        if not any(task in str(r["messages"][0]["content"]) for task in side_tasks)
    ]


def adapter_of(app: App) -> TelegramAdapter:
    adapter = app.dispatcher.adapters["telegram"]
    assert isinstance(adapter, TelegramAdapter)
    return adapter


async def test_text_round_trip_and_command_menu(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, lambda body: f"You said: {last_user_text(body)}")
    await telegram()

    await tg.send_text(CHAT, "hello there lifebot")

    # The reply streams into one message (a draft, then edits): wait for its final text.
    await tg.wait_for(lambda: tg.texts(CHAT) == ["You said: hello there lifebot"])
    menu = {c["command"] for c in tg.commands}
    assert {"start", "help", "link", "remember", "forget", "sources", "retry", "tz"} <= menu
    assert {"briefing", "quiet"} <= menu
    await tg.send_text(CHAT, "/help")
    texts = await tg.wait_texts(CHAT, 2)
    assert "/remember" in texts[-1]


@pytest.mark.parametrize("kind", ["a sticker", "a Word file"])
async def test_what_lifebot_cannot_open_is_answered_in_words_without_the_model(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM, kind: str
) -> None:
    await telegram()

    if kind == "a sticker":
        sticker = {"file_id": "s1", "file_unique_id": "u1", "type": "regular", "width": 512,
                   "height": 512, "is_animated": False, "is_video": False}  # fmt: skip
        await tg.push({"message": tg.message(CHAT, sticker=sticker)})
    else:
        docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        await tg.send_document(CHAT, b"PK\x03\x04", "report.docx", docx)

    [reply] = await tg.wait_texts(CHAT, 1)
    assert "can't open this kind of message" in reply and "PDF documents" in reply
    assert fake_llm.requests == []


async def test_same_update_twice_gives_one_reply_even_after_a_restart(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, lambda body: f"Answer to {last_user_text(body)}")
    app = await telegram()
    first = await tg.send_text(CHAT, "first question")
    await tg.wait_texts(CHAT, 1)

    await tg.redeliver(first)  # Telegram's at-least-once delivery, same process
    await tg.send_text(CHAT, "second question")
    await tg.wait_texts(CHAT, 2)

    # A restart: a new process (new adapter, same database) gets the update yet again.
    await adapter_of(app).stop()
    await telegram()
    await tg.redeliver(first)
    await tg.send_text(CHAT, "third question")
    await tg.wait_texts(CHAT, 3)

    assert tg.texts(CHAT) == [
        "Answer to first question",
        "Answer to second question",
        "Answer to third question",
    ]
    asked = [last_user_text(r) for r in agent_requests(fake_llm)]
    assert asked.count("first question") == 1


async def test_button_press_runs_once_and_a_stale_press_gets_a_polite_answer(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    app = await telegram()
    adapter = adapter_of(app)
    long_data = "/tz " + "America/Argentina/Buenos_Aires" + " " * 60  # over Telegram's 64 bytes
    receipt = await adapter.send(
        OutboundMessage(
            ADDRESS,
            "Which time zone are you in?",
            buttons=[Button("Lisbon", "/tz Europe/Lisbon"), Button("Buenos Aires", long_data)],
        )
    )
    mid = int(receipt.message_id)
    assert [b["text"] for b in tg.find(CHAT, mid).buttons()] == ["Lisbon", "Buenos Aires"]

    await tg.press(CHAT, mid, "/tz Europe/Lisbon")
    texts = await tg.wait_texts(CHAT, 2)

    assert texts[-1].startswith("Time zone set to Europe/Lisbon")
    assert tg.find(CHAT, mid).buttons() == []  # the keyboard is used up
    # The same message pressed again (a second tap, or an old keyboard): polite, no action.
    await tg.press(CHAT, mid, "/tz Europe/Lisbon")
    await tg.press(CHAT, 999, "/tz Europe/Lisbon", inaccessible=True)  # too old to see
    await tg.wait_for(lambda: len(tg.calls_to("answerCallbackQuery")) == 3)
    answers = [c.params for c in tg.calls_to("answerCallbackQuery")]
    assert "text" not in answers[0]
    assert answers[1]["text"] == answers[2]["text"] == STALE_BUTTON
    # The long data made the round trip through a token.
    second = await adapter.send(
        OutboundMessage(ADDRESS, "And now?", buttons=[Button("Buenos Aires", long_data)])
    )
    [wire] = [b["callback_data"] for b in tg.find(CHAT, int(second.message_id)).buttons()]
    await tg.press(CHAT, int(second.message_id), wire)
    texts = await tg.wait_texts(CHAT, 4)
    assert texts[-1].startswith("Time zone set to America/Argentina/Buenos_Aires")
    assert fake_llm.chat_requests == []


@pytest.mark.filterwarnings("ignore:.*attribute `retry_after`:DeprecationWarning")
async def test_429_is_retried_after_retry_after_and_reported_when_it_persists(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, "Here you go.")
    # One retry is enough to show both: the wait Telegram asked for, then giving up (each
    # further retry would add a second of waiting and prove nothing new).
    app = await telegram(telegram_retries=1)
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)

    await tg.send_text(CHAT, "hello")

    assert await tg.wait_texts(CHAT, 1) == ["Here you go."]
    refused, accepted = tg.calls_to("sendMessage")
    assert accepted.at - refused.at >= 1.0  # the retry waited as long as Telegram asked

    tg.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1, times=10)
    with pytest.raises(RateLimited) as caught:
        await adapter_of(app).send(OutboundMessage(ADDRESS, "a push"))
    assert caught.value.retry_after == 1


async def test_403_marks_the_identity_unreachable(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, "Hi!")
    app = await telegram()
    tg.block(CHAT)

    await tg.send_text(CHAT, "hello")

    async def marked() -> bool:
        async with app.db.session() as s:
            ident = (await s.exec(select(ChannelIdentity))).one()
        return ident.unreachable_at is not None

    await eventually(marked)
    async with app.db.session() as s:
        ident = (await s.exec(select(ChannelIdentity))).one()
    assert "blocked" in (ident.unreachable_reason or "")
    assert tg.texts(CHAT) == []


async def test_network_errors_are_retried_without_losing_the_reply(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, "Still here.")
    await telegram()
    tg.fail("sendMessage", 502, "Bad Gateway", times=2)

    await tg.send_text(CHAT, "hello")

    assert await tg.wait_texts(CHAT, 1) == ["Still here."]
    assert len(tg.calls_to("sendMessage")) == 3


TRICKY = "Use <b>bold</b> & <i>, e.g. a < b > c; 2 * 3 = 6 and *unbalanced, _x or **y"


async def test_tricky_text_arrives_exactly_as_written(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, TRICKY)
    await telegram()

    await tg.send_text(CHAT, "show me")

    assert await tg.wait_texts(CHAT, 1) == [TRICKY]
    assert tg.sent[CHAT][0].parse_mode == "HTML"


async def test_markdown_is_formatted_and_rejected_markup_falls_back_to_plain_text(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, "**Milk** is on your list, see [notes](https://example.com/n?a=1&b=2).")
    await telegram()

    await tg.send_text(CHAT, "what is on my list")
    [formatted] = await tg.wait_texts(CHAT, 1)
    msg = tg.sent[CHAT][0]
    assert formatted == "Milk is on your list, see notes."
    assert {e["type"] for e in msg.entities} == {"bold", "text_link"}
    assert [e["url"] for e in msg.entities if "url" in e] == ["https://example.com/n?a=1&b=2"]

    tg.fail("sendMessage", 400, "Bad Request: can't parse entities: unsupported start tag")
    await tg.send_text(CHAT, "again please")
    texts = await tg.wait_texts(CHAT, 2)
    assert texts[-1] == "**Milk** is on your list, see [notes](https://example.com/n?a=1&b=2)."
    assert tg.sent[CHAT][1].parse_mode is None


async def test_a_10000_character_answer_arrives_split_at_paragraphs_and_complete(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    paragraphs = [f"Paragraph {i}: " + ("lorem ipsum dolor " * 30).strip() for i in range(19)]
    long_answer = "\n\n".join(paragraphs)
    assert len(long_answer) > 10_000
    answer_with(fake_llm, long_answer)
    await telegram()

    await tg.send_text(CHAT, "tell me everything")
    await tg.wait_for(lambda: sum(len(t) for t in tg.texts(CHAT)) >= len(long_answer) - 10)

    texts = tg.texts(CHAT)
    assert len(texts) == 3
    assert all(len(t) <= 4096 for t in texts)
    assert "\n\n".join(texts) == long_answer  # every split is at a paragraph boundary


async def test_a_slow_answer_streams_into_one_edited_message(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer = "Let me think about that. " * 6
    fake_llm.default = lambda _body: Step(text=answer, chunk_size=10, chunk_delay=0.06)
    await telegram(telegram_edit_interval=0.5)

    await tg.send_text(CHAT, "what should I cook tonight")
    await tg.wait_for(lambda: bool(tg.texts(CHAT)) and tg.texts(CHAT)[0] == answer.strip())

    [msg] = tg.sent[CHAT]
    assert msg.edits and msg.edits[0].endswith("…")  # the user saw it grow
    assert len(tg.calls_to("sendMessage")) == 1
    assert tg.calls_to("sendChatAction")[0].params["action"] == "typing"


async def test_a_long_emoji_answer_keeps_its_draft_within_telegrams_limit(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """The draft was cut at 4094 Python characters, but Telegram counts UTF-16 units: an
    emoji is two, so a long emoji-heavy draft was refused ("message is too long") and the
    preview froze halfway while the answer went on streaming."""
    answer = "🎉🎉🎉🎉 " * 1000  # 5000 characters, 9000 UTF-16 units
    # 20 chunks over 1.6 s: past 4000 UTF-16 units after 0.7 s, so the edits every 0.5 s
    # still show the draft at the limit at least once before the answer is whole.
    fake_llm.default = lambda _body: Step(text=answer, chunk_size=250, chunk_delay=0.08)
    await telegram(telegram_edit_interval=0.5)

    await tg.send_text(CHAT, "celebrate")
    await tg.wait_for(lambda: " ".join(tg.texts(CHAT)) == answer.strip())

    wire = [c for c in tg.calls if c.method in {"sendMessage", "editMessageText"}]
    too_long = [c for c in wire if utf16_len(str(c.params["text"])) > 4096]
    assert too_long == [], [utf16_len(str(c.params["text"])) for c in too_long]
    drafts = [t for t in tg.sent[CHAT][0].edits if t.endswith("…")]
    assert max(utf16_len(t) for t in drafts) > 4000  # the user saw it grow to the limit


async def test_a_draft_that_cannot_be_edited_still_ends_in_the_whole_answer(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer = "Let me think about that. " * 6
    fake_llm.default = lambda _body: Step(text=answer, chunk_size=10, chunk_delay=0.06)
    # Every edit is refused (old message, deleted draft...): the preview stops, not the answer.
    tg.fail("editMessageText", 400, "Bad Request: message can't be edited", times=50)
    await telegram(telegram_edit_interval=0.5)

    await tg.send_text(CHAT, "what should I cook tonight")
    await tg.wait_texts(CHAT, 2)

    draft, final = tg.texts(CHAT)
    assert draft.endswith("…")
    assert final == answer.strip()


async def test_groups_are_ignored_unless_allowed_then_only_when_mentioned(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    group = -1001234567890
    tg.make_group(group)
    answer_with(fake_llm, lambda body: f"Re: {last_user_text(body)}")
    app = await telegram()
    await tg.send_text(group, f"@{BOT_USERNAME} are you there", user_id=CHAT)
    await tg.send_text(CHAT, "ping")  # processed after the group message: a marker
    await tg.wait_texts(CHAT, 1)
    assert tg.texts(group) == []

    await adapter_of(app).stop()
    await telegram(telegram_allow_groups=True)
    await tg.send_text(group, "just chatting among ourselves", user_id=CHAT)
    await tg.send_text(group, f"@{BOT_USERNAME} what's for dinner", user_id=CHAT)

    # On a loaded machine the answer may first show as a draft: wait for the final text.
    await tg.wait_for(lambda: tg.texts(group) == ["Re: what's for dinner"])
    assert tg.texts(group) == ["Re: what's for dinner"]
    assert tg.sent[group][0].reply_to is not None  # in groups the answer quotes the question


async def test_a_slow_answer_in_a_group_quotes_the_question_from_its_first_draft(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """A streamed answer's first draft was sent without the quote, and the final text edits
    that message: in a busy group a slow answer did not say which question it answered."""
    group = -1001234567891
    tg.make_group(group)
    answer = "Let me think about dinner. " * 6
    fake_llm.default = lambda _body: Step(text=answer, chunk_size=10, chunk_delay=0.06)
    await telegram(telegram_allow_groups=True, telegram_edit_interval=0.5)

    await tg.send_text(group, f"@{BOT_USERNAME} what's for dinner", user_id=CHAT)
    await tg.wait_for(lambda: tg.texts(group) == [answer.strip()])

    [msg] = tg.sent[group]
    assert msg.edits  # it streamed: a draft first, then edits
    assert msg.reply_to is not None  # and that draft already quoted the question


async def test_webhook_mode_rejects_a_wrong_secret_and_processes_nothing(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, "Webhook works.")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = await telegram(
        telegram_webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        telegram_webhook_secret="right-secret",
        telegram_webhook_port=port,
    )
    assert tg.webhook_url == f"http://127.0.0.1:{port}/telegram/hook"
    update = {"update_id": 1, "message": tg.message(CHAT, "hello")}

    assert await tg.post_webhook(update, "wrong-secret") == 401
    assert await tg.post_webhook(update, None) == 401
    async with app.db.session() as s:
        assert (await s.exec(select(Message))).all() == []
    assert fake_llm.requests == []

    assert await tg.post_webhook(update, "right-secret") == 200
    # The answer came only once the message was stored (the model has not answered yet), so
    # behind a load balancer the chat's next message is stored after it, wherever it goes.
    async with app.db.session() as s:
        stored = (await s.exec(select(Message))).all()
    assert [m.text for m in stored if m.direction == "in"] == ["hello"]
    assert await tg.wait_texts(CHAT, 1) == ["Webhook works."]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_every_webhook_process_accepts_the_secret_telegram_was_given(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    # Two processes behind one load balancer, no secret configured: Telegram keeps the one
    # the last process registered, and the first process must accept it too.
    answer_with(fake_llm, "Either process works.")
    first, second = _free_port(), _free_port()
    for port in (first, second):
        await telegram(
            telegram_webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
            telegram_webhook_port=port,
        )
    assert tg.webhook_secret
    tg.webhook_url = f"http://127.0.0.1:{first}/telegram/hook"  # the balancer picks the first

    assert (
        await tg.post_webhook(
            {"update_id": 7, "message": tg.message(CHAT, "hi")}, tg.webhook_secret
        )
        == 200
    )
    assert await tg.wait_texts(CHAT, 1) == ["Either process works."]


async def test_a_channel_without_a_token_problem_is_reported_in_plain_words(
    tg: FakeTelegram,
) -> None:
    adapter = TelegramAdapter(
        TelegramConfig(token="123456:WRONG-token-abcdefghijklmnopq", api_url=tg.api_url),
        clock=SystemClock(),
    )
    with pytest.raises(ChannelError, match="rejected TELEGRAM_BOT_TOKEN") as caught:
        await adapter.start(lambda _msg: asyncio.sleep(0))
    assert "WRONG-token" not in str(caught.value)  # the token never reaches a log


async def test_voice_note_round_trip_with_real_transcription(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    answer_with(fake_llm, lambda body: f"Noted: {last_user_text(body)}")
    await telegram()
    note = voice_note("Please remind me to buy milk tomorrow morning.", tmp_path)

    await tg.send_voice(CHAT, note, duration=3)

    echo, reply = await tg.wait_texts(CHAT, 2, within=60)
    heard = last_user_text(agent_requests(fake_llm)[0])
    assert "milk" in heard.lower() and "tomorrow" in heard.lower()
    assert echo == f"🎙 {heard}"  # the user sees what was understood...
    assert reply == f"Noted: {heard}"  # ...and the agent got it as the message
    voice_id = tg.sent[CHAT][0].reply_to
    assert voice_id is not None and tg.sent[CHAT][1].message_id > voice_id


async def test_an_oversized_voice_note_gets_a_clear_message_and_is_not_fetched(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await telegram(telegram_max_voice_bytes=50_000)

    await tg.send_voice(CHAT, b"\x00" * 80_000, duration=600)

    [reply] = await tg.wait_texts(CHAT, 1)
    assert "too big" in reply and "80 KB" in reply and "up to 50 KB" in reply
    assert tg.calls_to("getFile") == []
    assert fake_llm.requests == []


async def test_doctor_checks_the_token_against_the_bot_api(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    good = make_settings(tmp_path, telegram_bot_token=TOKEN, telegram_api_url=tg.api_url)
    check = await check_telegram(good)
    assert check.ok and check.detail == f"@{BOT_USERNAME}, long polling"

    wrong = make_settings(
        tmp_path,
        telegram_bot_token="123456:WRONG-token-abcdefghijklmnopq",
        telegram_api_url=tg.api_url,
    )
    check = await check_telegram(wrong)
    assert not check.ok and "rejected TELEGRAM_BOT_TOKEN" in check.detail
    assert "WRONG" not in check.detail


async def test_each_forum_topic_is_its_own_conversation_answered_in_that_topic(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, lambda body: f"Re: {last_user_text(body)}")
    app = await telegram()
    # A chat with topics: Telegram marks each message with its topic (message_thread_id).
    await tg.send_text(
        CHAT, "my trip to Porto starts Monday", message_thread_id=11, is_topic_message=True
    )
    await tg.wait_texts(CHAT, 1)
    await tg.send_text(
        CHAT, "my knee hurts after running", message_thread_id=22, is_topic_message=True
    )
    await tg.wait_texts(CHAT, 2)
    await tg.send_text(
        CHAT, "my hotel is near the river", message_thread_id=11, is_topic_message=True
    )
    await tg.wait_for(lambda: tg.texts(CHAT)[-1:] == ["Re: my hotel is near the river"])

    assert [m.topic for m in tg.sent[CHAT]] == [11, 22, 11]  # each answer in its own topic
    last = json.dumps(agent_requests(fake_llm)[-1]["messages"])
    assert "Porto" in last and "knee" not in last  # the topic's own history only
    async with app.db.session() as s:
        titles = {c.thread_id: c.title for c in (await s.exec(select(Conversation))).all()}
    assert titles == {"11": "my trip to Porto starts Monday", "22": "my knee hurts after running"}


async def test_journal_in_a_topic_takes_the_message_before_it(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """Telegram marks a message sent in a topic, replying to nothing, as a reply to the
    topic's opening service message (tdlib/telegram-bot-api#356): a bare /journal there was
    read as "/journal replying to a message", and refused ("I don't have that one")."""
    answer_with(fake_llm, "Noted.")
    await telegram()
    tg.enable_topics(CHAT)
    topic = tg.in_topic(CHAT, 11)
    await tg.send_text(CHAT, "slept badly, anxious about the exam", **topic)
    await tg.wait_texts(CHAT, 1)

    await tg.send_text(CHAT, "/journal", **topic)
    replies = await tg.wait_texts(CHAT, 2)
    assert replies[-1].startswith("Added your message of"), replies[-1]


async def test_in_a_group_topic_the_bot_opened_only_what_addresses_it_is_answered(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """In a group's topic that lifebot opened (/new), every message names lifebot's opening
    service message as the one it replies to: each was taken as a reply to lifebot, and
    lifebot answered the whole group's chatter there."""
    group = -1001234567892
    tg.make_group(group)
    tg.enable_topics(group)
    answer_with(fake_llm, lambda body: f"Re: {last_user_text(body)}")
    await telegram(telegram_allow_groups=True)
    topic = tg.in_topic(group, 41, opened_by_bot=True)
    await tg.send_text(group, "lunch at one, everyone?", user_id=CHAT, **topic)
    await tg.send_text(group, f"@{BOT_USERNAME} what's for dinner", user_id=CHAT, **topic)

    await tg.wait_for(lambda: tg.texts(group) == ["Re: what's for dinner"])
    assert [last_user_text(b) for b in agent_requests(fake_llm)] == ["what's for dinner"]


async def test_typing_shows_in_the_topic_being_answered(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """sendChatAction without message_thread_id shows "typing…" in the chat's General topic
    (Bot API, sendChatAction): a person waiting in a topic saw nothing there."""

    def slow(body: dict[str, Any]) -> Step:
        task = str(body["messages"][0]["content"])
        if "Classify the user's message" in task:
            return say('{"route": "chat"}')
        if "You find concrete plans" in task:
            # Only the answer is slow: a slow plan finder beside it would still be running
            # when the test ends, and stopping the app waits for it.
            return say('{"events": []}')
        return say("Here it is.", delay=1.0)

    fake_llm.default = slow
    await telegram()
    tg.enable_topics(CHAT)
    await tg.send_text(CHAT, "what's on tomorrow?", **tg.in_topic(CHAT, 11))
    await tg.wait_texts(CHAT, 1)

    actions = tg.calls_to("sendChatAction")
    assert actions, "no typing indicator during a slow answer"
    assert {int(c.params.get("message_thread_id") or 0) for c in actions} == {11}


async def test_new_in_a_topic_opens_a_new_topic_with_a_fresh_conversation(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, lambda body: f"Re: {last_user_text(body)}")
    app = await telegram()
    tg.enable_topics(CHAT)
    topic = {"message_thread_id": 11, "is_topic_message": True}
    await tg.send_text(CHAT, "my trip to Porto starts Monday", **topic)
    await tg.wait_texts(CHAT, 1)

    await tg.send_text(CHAT, "/new Knee rehab", **topic)
    await tg.wait_for(lambda: len(tg.texts(CHAT)) >= 3)
    [(opened, name)] = tg.topics[CHAT].items()
    assert name == "Knee rehab"
    here, there = (
        tg.sent[CHAT][-2:] if tg.sent[CHAT][-1].topic == opened else tg.sent[CHAT][-2:][::-1]
    )
    assert here.topic == 11 and "Opened a new topic" in here.text
    assert there.topic == opened and there.text.startswith('New topic "Knee rehab"')

    # The new topic is its own conversation, named, and knows nothing of Porto...
    new_topic = {"message_thread_id": opened, "is_topic_message": True}
    await tg.send_text(CHAT, "my physio is on Tuesday", **new_topic)
    await tg.wait_for(lambda: tg.texts(CHAT)[-1:] == ["Re: my physio is on Tuesday"])
    assert "Porto" not in json.dumps(agent_requests(fake_llm)[-1]["messages"])
    # ...while the old topic keeps its own history.
    await tg.send_text(CHAT, "what about hotels?", **topic)
    await tg.wait_for(lambda: tg.texts(CHAT)[-1:] == ["Re: what about hotels?"])
    assert "Porto" in json.dumps(agent_requests(fake_llm)[-1]["messages"])
    async with app.db.session() as s:
        titles = {c.thread_id: c.title for c in (await s.exec(select(Conversation))).all()}
    assert titles[str(opened)] == "Knee rehab"


async def test_new_where_topics_cannot_be_opened_starts_afresh_in_place(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, lambda body: f"Re: {last_user_text(body)}")
    await telegram()
    topic = {"message_thread_id": 11, "is_topic_message": True}  # topics not enabled here
    await tg.send_text(CHAT, "my trip to Porto starts Monday", **topic)
    await tg.wait_texts(CHAT, 1)
    await tg.send_text(CHAT, "/new", **topic)
    [_, fresh] = await tg.wait_texts(CHAT, 2)
    assert fresh.startswith("Fresh start") and tg.sent[CHAT][-1].topic == 11
    await tg.send_text(CHAT, "my knee hurts after running", **topic)
    await tg.wait_for(lambda: tg.texts(CHAT)[-1:] == ["Re: my knee hurts after running"])
    assert "Porto" not in json.dumps(agent_requests(fake_llm)[-1]["messages"])


async def test_history_keeps_the_order_messages_arrived_in_not_their_telegram_dates(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answer_with(fake_llm, lambda body: f"Re: {last_user_text(body)}")
    await telegram()
    await tg.send_text(CHAT, "my trip to Porto starts Monday")
    await tg.wait_texts(CHAT, 1)
    # Telegram dates are whole seconds (and a late update keeps its old date): this message
    # is stamped before the reply it follows.
    await tg.send_text(CHAT, "and the hotel is by the river", date=int(time.time()) - 5)
    # Wait for this answer itself: under load the first answer may arrive as a draft and a
    # final message, which would make "two texts" true before this turn even ran.
    await tg.wait_for(lambda: tg.texts(CHAT)[-1:] == ["Re: and the hotel is by the river"])
    # The second turn's own request: the first turn's hooks (a plan to propose) may ask the
    # model after it, the faster dispatch is.
    second = [
        r for r in agent_requests(fake_llm) if last_user_text(r) == "and the hotel is by the river"
    ][-1]
    said = [m["content"] for m in second["messages"][1:]]
    assert said == [
        "my trip to Porto starts Monday",
        "Re: my trip to Porto starts Monday",
        "and the hotel is by the river",
    ]
