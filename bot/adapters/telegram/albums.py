"""Albums: photos sent together reach the bot as one message each, and are read as one.

Telegram delivers an album (a media group: up to ten photos or files sent at once) as one
``Message`` per item, all with the same ``media_group_id``, the caption on one of them
(core.telegram.org/bots/api#message). Read one by one, a question asked about the album was
answered looking at one picture and every other picture got a reply of its own. Here the
items of a chat's album are held until no new one has come for ``quiet`` seconds (or anything
else arrives in that chat), then handed on together, oldest first.

The chat's order is kept: ``flush`` delivers the chat's waiting album before anything else of
that chat is handled, and waits for an album its timer is delivering. A webhook request for
an item is answered once the item is held (Telegram sends a chat's next update only after the
last was answered, so holding the answer would keep the album from ever coming together): a
crash in the second before the album is handled loses it, where a single message is answered
only once stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telegram import Message

from bot.locks import KeyedLocks

log = logging.getLogger(__name__)

ALBUM_QUIET = 1.0
"""Seconds without a new item after which an album is complete (Telegram sends the items of
one album back to back)."""


@dataclass(slots=True)
class _Waiting:
    """One chat's album still being received."""

    group: str
    messages: list[Message] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None


class Albums:
    """Holds the items of each chat's album and hands them on together."""

    def __init__(
        self, deliver: Callable[[list[Message]], Awaitable[None]], quiet: float = ALBUM_QUIET
    ) -> None:
        self._deliver = deliver
        self.quiet = quiet
        """Seconds of silence that end an album."""
        self._waiting: dict[int, _Waiting] = {}
        self._locks = KeyedLocks[int]()
        self._timers: set[asyncio.Task[None]] = set()

    @staticmethod
    def is_item(message: Message) -> bool:
        """Whether ``message`` is part of an album of pictures or files to hold.

        Audio files sent together stay one message each: each is transcribed on its own.
        """
        return (
            message.media_group_id is not None and message.audio is None and message.voice is None
        )

    async def add(self, message: Message) -> None:
        """Hold an album's item; a different album of the chat waiting before goes on first."""
        chat = message.chat.id
        group = str(message.media_group_id)
        waiting = self._waiting.get(chat)
        if waiting is not None and waiting.group != group:
            await self.flush(chat)
            waiting = None
        if waiting is None:
            waiting = self._waiting[chat] = _Waiting(group)
        waiting.messages.append(message)
        if waiting.timer is not None:
            waiting.timer.cancel()
        timer = asyncio.create_task(self._after_quiet(chat, waiting), name="telegram-album")
        waiting.timer = timer
        self._timers.add(timer)
        timer.add_done_callback(self._timers.discard)

    async def _after_quiet(self, chat: int, waiting: _Waiting) -> None:
        await asyncio.sleep(self.quiet)
        if self._waiting.get(chat) is waiting:
            waiting.timer = None  # from here on it delivers: nobody may cancel it
            await self.flush(chat)

    async def flush(self, chat: int) -> None:
        """Deliver the chat's waiting album now, and wait for one already being delivered."""
        waiting = self._waiting.pop(chat, None)
        if waiting is not None and waiting.timer is not None:
            waiting.timer.cancel()
        async with self._locks.hold(chat):
            if waiting is not None:
                messages = sorted(waiting.messages, key=lambda m: m.message_id)
                try:
                    await self._deliver(messages)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("failed to handle a Telegram album in chat %s", chat)

    async def close(self) -> None:
        """Deliver every album still waiting, and let those being delivered finish."""
        for chat in list(self._waiting):
            await self.flush(chat)
        await asyncio.gather(*self._timers, return_exceptions=True)
