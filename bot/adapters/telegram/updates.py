"""Reading updates in order: one chat's messages one after another, chats side by side."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from telegram import Update
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
