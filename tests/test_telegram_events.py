"""Telegram wire -> InboundMessage, as pure functions on PTB objects (no server involved)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from telegram import CallbackQuery, Message

from bot.adapters.telegram.events import from_message, from_press, person_text, voice_attachment

BOT_ID = 777
BOT = "lifebot_test_bot"
ANA = {"id": 42, "is_bot": False, "first_name": "Ana", "last_name": "Lima"}
DM = {"id": 42, "type": "private"}
GROUP = {"id": -100123, "type": "supergroup", "title": "Family"}


def message(chat: dict[str, Any], **fields: Any) -> Message:
    data: dict[str, Any] = {"message_id": 5, "date": 1_700_000_000, "chat": chat, "from": ANA}
    data.update(fields)
    msg = Message.de_json(data, None)
    assert msg is not None
    return msg


def mention(text: str, handle: str) -> dict[str, Any]:
    start = text.index(handle)
    return {"type": "mention", "offset": start, "length": len(handle)}


def text_of(msg: Message, *, allow_groups: bool = True) -> str | None:
    return person_text(msg, allow_groups=allow_groups, bot_id=BOT_ID, username=BOT)


def test_a_dm_becomes_one_inbound_message_keyed_by_chat_and_message_id() -> None:
    msg = message(DM, text="what's on today?")
    text = text_of(msg)
    assert text == "what's on today?"

    inbound = from_message(msg, account=str(BOT_ID), text=text)

    assert inbound.dedupe_key == f"telegram:{BOT_ID}:42:5"
    assert inbound.sender_id == "42"
    assert inbound.sender_name == "Ana Lima"
    assert inbound.private is True
    assert inbound.received_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert inbound.reply_to is None


def test_other_bots_and_anonymous_senders_are_ignored() -> None:
    robot = {"id": 9, "is_bot": True, "first_name": "Other"}
    assert text_of(message(DM, text="beep", **{"from": robot})) is None
    assert text_of(message(DM, text="channel post", **{"from": None})) is None


def test_group_messages_count_only_when_groups_are_allowed_and_the_bot_is_addressed() -> None:
    said = f"@{BOT} what's for dinner"
    addressed = message(GROUP, text=said, entities=[mention(said, f"@{BOT}")])
    chatter = message(GROUP, text="just chatting among ourselves")

    assert text_of(addressed, allow_groups=False) is None
    assert text_of(chatter) is None
    assert text_of(addressed) == "what's for dinner"  # the mention is not part of the question
    inbound = from_message(addressed, account=str(BOT_ID), text="what's for dinner")
    assert inbound.private is False
    assert inbound.address.chat_id == "-100123"


OUR_QUESTION = {
    "message_id": 4,
    "date": 1_700_000_000,
    "chat": GROUP,
    "from": {"id": BOT_ID, "is_bot": True, "first_name": "Lifebot"},
    "text": "Pasta?",
}
"""A question lifebot asked in the group (message 4)."""


def test_a_reply_to_the_bot_in_a_group_is_addressed_and_threaded() -> None:
    msg = message(GROUP, text="yes please", reply_to_message=OUR_QUESTION)

    assert text_of(msg) == "yes please"
    assert from_message(msg, account=str(BOT_ID), text="yes please").reply_to == "4"


def test_a_reply_to_the_first_message_of_a_reply_chain_is_still_a_reply() -> None:
    """Outside topics a supergroup's reply chain is numbered after its first message too
    (message_thread_id): replying to that message is a real reply."""
    msg = message(GROUP, text="yes please", reply_to_message=OUR_QUESTION, message_thread_id=4)

    assert text_of(msg) == "yes please"
    assert from_message(msg, account=str(BOT_ID), text="yes please").reply_to == "4"


def test_a_voice_note_carries_its_attachment_and_a_caption_is_the_text() -> None:
    voice = {
        "file_id": "f1",
        "file_unique_id": "u1",
        "duration": 3,
        "mime_type": "audio/ogg",
        "file_size": 1234,
    }
    msg = message(DM, voice=voice, caption="for later")

    assert text_of(msg) == "for later"
    attachment = voice_attachment(msg)
    assert attachment is not None
    assert (attachment.kind, attachment.mime_type, attachment.size) == ("voice", "audio/ogg", 1234)
    assert voice_attachment(message(DM, text="plain")) is None


def test_a_button_press_is_its_own_message_answering_the_message_it_was_on() -> None:
    on = message(
        DM,
        text="Add this to your calendar?",
        **{"from": {"id": BOT_ID, "is_bot": True, "first_name": "Lifebot"}},
    )
    query = CallbackQuery.de_json(
        {"id": "987", "from": ANA, "chat_instance": "ci", "data": "yes", "message": on.to_dict()},
        None,
    )
    assert query is not None
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    inbound = from_press(query, on, account=str(BOT_ID), data="accept:12", received_at=now)

    assert inbound.dedupe_key == f"telegram:{BOT_ID}:42:cb:987"
    assert (inbound.text, inbound.callback_data) == ("accept:12", "accept:12")
    assert inbound.reply_to == "5"
    assert inbound.received_at == now
