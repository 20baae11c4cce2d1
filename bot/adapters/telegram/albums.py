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
last was answered, so holding the answer would keep the album from ever coming together), and
Telegram never sends an answered item again. So each item is kept in the ``store`` (the
database, ``inbox``) before it is held, and let go once the album is stored as a message (or
was not for us): items a killed process held are taken on by ``recover`` at the next start,
or, on PostgreSQL, by any process's ``recover`` once their process's heartbeat has gone
silent (or nobody has held them for a minute). An album handled twice is answered once
(dispatch's dedupe key is its first item's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from telegram import Message

from bot.locks import KeyedLocks

log = logging.getLogger(__name__)

ALBUM_QUIET = 1.0
"""Seconds without a new item after which an album is complete (Telegram sends the items of
one album back to back)."""
RECOVER_EVERY = 5.0
"""Seconds between two looks for items a process that is gone left held (one query of a table
that is empty almost always: cheap enough to look often, so an album waits little longer
than its dead process takes to be silent, ``AlbumHolder.silent_after``)."""

Deliver = Callable[[list[Message], Callable[[], None]], Awaitable[None]]
"""Hands an album on; calls its second argument once the album is stored as a message."""


class AlbumStore(Protocol):
    """Where items are kept while held, so that a killed process loses none."""

    async def keep(self, message: Message) -> None:
        """Keep an item (before its webhook request is answered)."""

    async def forget(self, messages: Sequence[Message]) -> None:
        """Let go of a handled album's items."""

    async def left(self, *, starting: bool) -> list[Message]:
        """Items no live process holds, now taken on by this one."""


@dataclass(slots=True)
class _Waiting:
    """One chat's album still being received."""

    group: str
    messages: list[Message] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None


class Albums:
    """Holds the items of each chat's album and hands them on together."""

    def __init__(self, deliver: Deliver, quiet: float = ALBUM_QUIET) -> None:
        self._deliver = deliver
        self.quiet = quiet
        """Seconds of silence that end an album."""
        self.store: AlbumStore | None = None
        """Keeps the items while they are held (None: in memory only)."""
        self._recovering: asyncio.Task[None] | None = None
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
        """Keep and hold an album's item; a different album of the chat waiting goes on first."""
        if self.store is not None:
            try:
                await self.store.keep(message)
            except Exception:  # the database is down: held all the same, in memory only
                log.exception("could not keep an album's item in chat %s", message.chat.id)
        await self._hold(message)

    async def recover(self, *, starting: bool = False) -> int:
        """Hold again the items a process that is gone held (they are handled as albums are).

        ``starting``: this process takes no update yet. Returns how many items.
        """
        if self.store is None:
            return 0
        left = await self.store.left(starting=starting)
        for message in left:
            await self._hold(message)
        if left:
            log.warning("took on %d album item(s) a stopped process had not handled", len(left))
        return len(left)

    def recover_every(self, seconds: float = RECOVER_EVERY) -> None:
        """Look for left items every ``seconds`` (another process may die at any time)."""
        if self.store is None:
            return

        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds)
                try:
                    await self.recover()
                except Exception:
                    log.exception("could not look for album items left by a stopped process")

        self._recovering = asyncio.create_task(loop(), name="telegram-album-recovery")

    async def _hold(self, message: Message) -> None:
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
                await self._handle(chat, sorted(waiting.messages, key=lambda m: m.message_id))

    async def _handle(self, chat: int, messages: list[Message]) -> None:
        """Deliver an album; its items are let go once it is stored (killed before: kept)."""
        letting_go: list[asyncio.Task[None]] = []

        def stored() -> None:  # called by dispatch, perhaps more than once
            if not letting_go:
                letting_go.append(asyncio.create_task(self._forget(messages)))

        try:
            await self._deliver(messages, stored)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("failed to handle a Telegram album in chat %s", chat)
        stored()  # not for us, or failed: it is not handled again either
        await letting_go[0]

    async def _forget(self, messages: list[Message]) -> None:
        if self.store is None:
            return
        try:
            await self.store.forget(messages)
        except Exception:  # kept: taken on again later, and then dropped as a redelivery
            log.exception("could not let go of an album's items in chat %s", messages[0].chat.id)

    async def close(self) -> None:
        """Deliver every album still waiting, and let those being delivered finish."""
        if self._recovering is not None:
            self._recovering.cancel()
            await asyncio.gather(self._recovering, return_exceptions=True)
        for chat in list(self._waiting):
            await self.flush(chat)
        await asyncio.gather(*self._timers, return_exceptions=True)
