"""Chat on the web page: a channel like the others, through the same dispatcher.

A message typed on the Chat page (with a photo or a PDF attached, or a button pressed) becomes
an ``InboundMessage`` on the ``web`` channel, exactly as an upload does (``Uploads.message``),
in the person's one web conversation (``web/web/user:<id>``), so every command works and
``/new`` starts afresh there. Dispatch runs the turn in a task of its own: the request that
sent the message reads what the ``WebChannel`` hears (progress, the answer as it is written,
the final answer with its sources) while the task runs. When the browser goes away mid-turn,
the task goes on and the answer is stored; the page shows it from the conversation next time.

The page renders the conversation from the database (``lines``): what was said, the sources
of each answer as links to the cited turn, and the messages a crash left waiting for /retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from bot.agent.conversations import Conversations
from bot.agent.memory.views import MemoryViews
from bot.dispatch import DispatchResult
from bot.messages import Citation, InboundMessage, file_name
from bot.web.channel import ChannelEvent, Listener
from bot.web.sources import SourceView, source_views
from bot.web.uploads import (
    KINDS,
    MAX_NOTE,
    StoredDocument,
    StoredPhoto,
    UploadOutcome,
    Uploads,
    address_of,
    outcome_of,
    refused,
)
from storage.models import Message, User

log = logging.getLogger(__name__)

SHOWN = 60
"""How many of the latest messages the Chat page shows."""
MAX_PRESSED = 200
"""The longest button data a page may send (commands such as ``/retry 12``)."""
STOP_WAIT = 10.0
"""Seconds a stopping server gives running turns to end before they are cancelled."""


@dataclass(slots=True)
class ChatLine:
    """One message of the conversation as the Chat page shows it."""

    message: Message
    sources: list[SourceView] = field(default_factory=list)
    documents: list[StoredDocument] = field(default_factory=list)
    photos: list[StoredPhoto] = field(default_factory=list)

    @property
    def waiting(self) -> bool:
        """A message of the person's that waits for /retry (the model was down, or a crash)."""
        m = self.message
        return m.direction == "in" and m.status == "pending_retry"


class ChatTurn:
    """One message on its way through dispatch, and what the request hears meanwhile."""

    def __init__(
        self, msg: InboundMessage, listener: Listener, task: asyncio.Task[DispatchResult]
    ) -> None:
        self.msg = msg
        self.listener = listener
        self.task = task

    async def events(self) -> AsyncIterator[ChannelEvent | DispatchResult]:
        """Everything heard, in order, then dispatch's result (the turn's end).

        Leaving early (the browser went away) leaves the turn running.
        """
        queue = self.listener.events
        while True:
            getter = asyncio.ensure_future(queue.get())
            try:
                done, _ = await asyncio.wait(
                    {getter, self.task}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                if not getter.done():
                    getter.cancel()
            if getter in done and not getter.cancelled():
                yield getter.result()
                continue
            while not queue.empty():
                yield queue.get_nowait()
            yield self.task.result()
            return

    async def finished(self) -> DispatchResult:
        """Wait for the turn to end."""
        return await asyncio.shield(self.task)


class WebChat:
    """The Chat page's operations for one signed-in person."""

    def __init__(self, conversations: Conversations, memory: MemoryViews, uploads: Uploads) -> None:
        self.conversations = conversations
        self.memory = memory
        """Where a reply's cited document pieces are looked up."""
        self.uploads = uploads
        self._running: set[asyncio.Task[DispatchResult]] = set()

    async def conversation(self, user: User) -> int | None:
        """The id of the person's web conversation (made on first use)."""
        assert user.id is not None
        return await self.conversations.open(user.id, address_of(user.id))

    async def lines(self, user: User, tz: ZoneInfo, limit: int = SHOWN) -> list[ChatLine]:
        """The latest messages of the web conversation, oldest first, with their sources."""
        assert user.id is not None
        conv = await self.conversation(user)
        if conv is None:
            return []
        rows = await self.conversations.chat(user.id, conv, limit)
        out = []
        for row in rows:
            cited = [Citation.from_dict(c) for c in row.citations or []]
            line = ChatLine(row, await source_views(self.memory, user.id, cited, tz))
            if row.direction == "in":
                line.documents, line.photos = outcome_of(row)
            out.append(line)
        return out

    def check(
        self,
        text: str,
        file: tuple[str, bytes, int | None] | None,
        pressed: str | None,
    ) -> UploadOutcome | None:
        """Why this message cannot be sent (nothing is stored then), or None.

        ``file``: (name, the first bytes read, the full size when known).
        """
        if pressed is not None and (not pressed.startswith("/") or len(pressed) > MAX_PRESSED):
            return refused("note", "That button is not one of mine. I kept nothing.")
        if len(text) > MAX_NOTE:
            return refused(
                "note", f"That message is too long (at most {MAX_NOTE} characters). I kept nothing."
            )
        if file is not None:
            name, data, size = file
            problem = self.uploads.check(file_name(name), data, size)
            if problem is not None:
                return problem
        elif not text.strip() and pressed is None:
            return refused("empty", f"Write a message, or attach {KINDS}.")
        return None

    def begin(
        self, user: User, text: str, file: tuple[str, bytes] | None, pressed: str | None
    ) -> ChatTurn:
        """Send a checked message through dispatch; the turn runs in a task of its own."""
        if file is not None:
            file = (file_name(file[0]), file[1])
        msg = self.uploads.message(user, text, file, pressed=pressed, prefix="chat")
        channel = self.uploads.channel
        listener = channel.listen(msg.message_id, msg.address.chat_id)
        dispatch = self.uploads.dispatch
        assert dispatch is not None

        async def run() -> DispatchResult:
            try:
                return await dispatch(msg)
            finally:
                channel.done(listener)

        task = asyncio.create_task(run(), name=f"web-chat-{msg.message_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return ChatTurn(msg, listener, task)

    async def stored_id(self, turn: ChatTurn) -> int | None:
        """The stored message of a turn (None when it was not kept)."""
        assert turn.msg.user_id is not None
        row = await self.conversations.by_dedupe_key(turn.msg.user_id, turn.msg.dedupe_key)
        return row.id if row is not None else None

    async def stop(self) -> None:
        """Let running turns end (up to ``STOP_WAIT`` seconds), then cancel the rest.

        A cancelled turn leaves its message waiting; the next start offers it for /retry.
        """
        running = list(self._running)
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=STOP_WAIT)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
