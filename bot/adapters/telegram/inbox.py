"""An album's items kept in the database from their webhook's answer until it is handled.

``Albums`` holds the items of an album in memory until the album is complete, and each item's
webhook request is answered meanwhile. Kept here first, an item outlives the process: the next
start (one process, SQLite) takes on every item left. On PostgreSQL other processes may hold
albums of their own right now: each item names the process that took it on (``AlbumHolder``),
and any process takes it over as soon as that one's heartbeat row (``lifebotprocess``) says
it stopped or has been silent for ``silent_after`` seconds (a few heartbeats), so a lone
process killed and started again answers its album seconds later. An item nobody has taken
on for ``ORPHANED`` seconds is taken over whatever its holder (no holder named, or one with no
heartbeat row yet: a process starting writes its first after its channels). Handling an album
twice answers it once: dispatch stores it under the dedupe key of its first item and drops it
the second time.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import timedelta

from sqlmodel.ext.asyncio.session import AsyncSession
from telegram import Bot, Message

from bot.adapters.telegram.config import AlbumHolder
from bot.clock import Clock
from storage.db import Database
from storage.repos.inbox import InboxRepo, Left

ORPHANED = 60.0
"""Seconds after which an item no process has let go of is taken over, whoever holds it (a
live one lets go as soon as its album is stored, a second or two after the last item)."""


class AlbumInbox:
    """The ``AlbumStore`` of one bot account, in the ``inboxitem`` table."""

    def __init__(
        self,
        db: Database,
        account: str,
        bot: Bot,
        clock: Clock,
        holder: AlbumHolder | None = None,
    ) -> None:
        self.db = db
        self.account = account
        self.bot = bot
        self.clock = clock
        self.holder = holder
        """This process, named in the items it takes on (None: no heartbeat, the minute only)."""

    def _repo(self, s: AsyncSession) -> InboxRepo:
        return InboxRepo(s, "telegram", self.account)

    async def keep(self, message: Message) -> None:
        """Keep an item before its webhook request is answered."""
        async with self.db.session() as s:
            await self._repo(s).keep(
                str(message.chat.id),
                str(message.message_id),
                message.to_dict(),
                self.clock.now(),
                None if self.holder is None else self.holder.process_id,
            )

    async def forget(self, messages: Sequence[Message]) -> None:
        """Let go of an album's items (it is stored as one message, or was not for us)."""
        async with self.db.session() as s:
            for chat, items in itertools.groupby(messages, key=lambda m: m.chat.id):
                await self._repo(s).forget(str(chat), [str(m.message_id) for m in items])

    async def left(self, *, starting: bool) -> list[Message]:
        """Items no live process is handling, taken on by this one, album by album.

        ``starting``: on SQLite nothing else runs, so at start every item kept is left over.
        """
        left = self._left(starting=starting)
        now = self.clock.now()
        async with self.db.session() as s:
            rows = await self._repo(s).left(left)
        albums: dict[tuple[str, object], list[int]] = {}
        for row in rows:
            assert row.id is not None
            albums.setdefault((row.chat_id, row.payload.get("media_group_id")), []).append(row.id)
        taken: set[int] = set()
        for ids in albums.values():
            async with self.db.session() as s:
                if await self._repo(s).take(ids, left, now):
                    taken.update(ids)
        return [Message.de_json(r.payload, self.bot) for r in rows if r.id in taken]

    def _left(self, *, starting: bool) -> Left:
        now = self.clock.now()
        before = now if starting and self.db.is_sqlite else now - timedelta(seconds=ORPHANED)
        if self.holder is None:
            return Left(before)
        silent_since = now - timedelta(seconds=self.holder.silent_after)
        return Left(before, self.holder.process_id, silent_since)
