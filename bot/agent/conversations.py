"""Stored conversations and their messages, as the pages read them.

The web chat keeps one conversation per user on the ``web`` channel; other pages open a
message in its context, list what waits for /retry, or find a thread. Each call is its own
transaction, scoped to one user: another user's id finds nothing.
"""

from __future__ import annotations

from bot.messages import Address
from storage.db import Database
from storage.models import Message
from storage.repos.messages import ConversationRepo, MessageRepo
from storage.repos.web import WebViewRepo


class Conversations:
    """A user's conversations and messages (reads, and the web chat's conversation)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def message(self, user_id: int, message_id: int) -> Message | None:
        """One of the user's messages."""
        async with self.db.session() as s:
            return await MessageRepo(s).get(user_id, message_id)

    async def by_dedupe_key(self, user_id: int, dedupe_key: str) -> Message | None:
        """The user's message stored under this dedupe key (an inbound message's)."""
        async with self.db.session() as s:
            return await MessageRepo(s).by_dedupe_key(user_id, dedupe_key)

    async def around(self, user_id: int, message_id: int) -> tuple[Message, list[Message]] | None:
        """A message and its conversation around it; None when it is not the user's."""
        async with self.db.session() as s:
            msg = await MessageRepo(s).get(user_id, message_id)
            if msg is None:
                return None
            return msg, await WebViewRepo(s).around(user_id, msg, 8)

    async def thread_of(self, user_id: int, conversation_id: int) -> str | None:
        """The chat thread a conversation lives in (None: the chat itself, or not found)."""
        async with self.db.session() as s:
            conv = await ConversationRepo(s).get(user_id, conversation_id)
        return conv.thread_id if conv is not None and conv.thread_id else None

    async def waiting(self, user_id: int, limit: int = 20) -> list[Message]:
        """The user's messages that wait for /retry, newest first."""
        async with self.db.session() as s:
            return await WebViewRepo(s).waiting(user_id, limit)

    async def open(self, user_id: int, address: Address) -> int:
        """The id of the user's conversation at ``address`` (made on first use)."""
        async with self.db.session() as s:
            conv = await ConversationRepo(s).get_or_create(user_id, address)
            assert conv.id is not None
            return conv.id

    async def chat(self, user_id: int, conversation_id: int, limit: int) -> list[Message]:
        """The newest ``limit`` messages of a conversation, oldest first (the Chat page)."""
        async with self.db.session() as s:
            return await WebViewRepo(s).chat(user_id, conversation_id, limit)
