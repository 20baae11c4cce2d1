"""Reading updates: per-chat ordering, group addressing, stale button presses."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Container
from typing import Any

from telegram import CallbackQuery, Message, MessageEntity, Update
from telegram.ext import BaseUpdateProcessor

from bot.locks import KeyedLocks


class ChatOrderedProcessor(BaseUpdateProcessor):
    """Different chats concurrently; messages of one chat one after another, in order.

    Button presses skip the queue so their spinner is answered at once (dispatch still
    serialises the turns of one conversation).
    """

    def __init__(self, max_concurrent_updates: int = 64) -> None:
        super().__init__(max_concurrent_updates)
        self._locks = KeyedLocks[int]()

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Await the update's processing behind its chat's lock."""
        chat = update.effective_chat if isinstance(update, Update) and update.message else None
        if chat is None:
            await coroutine
            return
        async with self._locks.hold(chat.id):
            await coroutine

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""


def addressed(message: Message, text: str, bot_id: int, username: str) -> tuple[bool, str]:
    """In a group: only when replied to, mentioned, or sent a /command@thisbot."""
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot_id:
        return True, text
    handle = f"@{username}".lower()
    kinds: list[str | None] = [
        MessageEntity.MENTION,
        MessageEntity.TEXT_MENTION,
        MessageEntity.BOT_COMMAND,
    ]
    entities = (
        message.parse_entities(kinds) if message.text else message.parse_caption_entities(kinds)
    )
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.lower() == handle:
            return True, re.sub(r"[ \t]{2,}", " ", text.replace(value, "")).strip()
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True, text
        if entity.type == MessageEntity.BOT_COMMAND and value.lower().endswith(handle):
            return True, text
    return False, text


def stale_press(query: CallbackQuery, msg: Message, used: Container[tuple[int, int]]) -> bool:
    """A press on a used keyboard, or on a button the message no longer carries."""
    if (msg.chat.id, msg.message_id) in used or not query.data:
        return True
    markup = msg.reply_markup
    wires = [b.callback_data for row in markup.inline_keyboard for b in row] if markup else []
    return query.data not in wires
