"""Progress while the agent works: the typing indicator and a draft edited as the answer streams.

Telegram allows about one message (or edit) per second per chat, so the draft is edited at most
every ``edit_interval`` seconds; answers that arrive within that interval are sent once, whole,
without any draft. The typing indicator lasts ~5 s on Telegram, so it is renewed every 4 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from telegram.constants import ChatAction

from bot.adapters.draft import DraftStream
from bot.adapters.telegram.format import MAX_MESSAGE, cut_utf16, escape
from bot.adapters.telegram.send import TelegramSender
from bot.errors import ChannelError
from bot.messages import OutboundMessage, Receipt

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0
"""Seconds between typing actions (Telegram shows one for about five seconds)."""
TYPING_FIRST_AFTER = 0.3
"""Quick answers (commands, duplicates) never show typing at all."""
TYPING_AT_MOST = 300.0
"""A stuck turn stops "typing" after this long."""


class Typing:
    """Per-chat typing indicators, each a tracked task that is always cancelled."""

    def __init__(self, sender: TelegramSender) -> None:
        self.sender = sender
        self._tasks: dict[int, asyncio.Task[None]] = {}

    @contextlib.asynccontextmanager
    async def during(self, chat_id: int, topic: int | None = None) -> AsyncIterator[None]:
        """Show "typing…" in ``chat_id`` while the block runs (or until a reply is sent).

        In a topic it shows there: without the topic Telegram shows it in the chat's General.
        """
        self.stop(chat_id)
        task = asyncio.create_task(self._loop(chat_id, topic), name=f"telegram-typing-{chat_id}")
        self._tasks[chat_id] = task
        try:
            yield
        finally:
            if self._tasks.get(chat_id) is task:
                del self._tasks[chat_id]
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def stop(self, chat_id: int) -> None:
        """Stop the indicator (a reply is going out; Telegram hides it on its own then)."""
        task = self._tasks.pop(chat_id, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        """Cancel every indicator."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self, chat_id: int, topic: int | None) -> None:
        await asyncio.sleep(TYPING_FIRST_AFTER)
        deadline = time.monotonic() + TYPING_AT_MOST
        while time.monotonic() < deadline:
            try:
                await self.sender.bot.send_chat_action(
                    chat_id, ChatAction.TYPING, message_thread_id=topic
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001  (a missing indicator is never worth a failure)
                log.debug("typing indicator failed in chat %s: %s", chat_id, exc)
            await asyncio.sleep(TYPING_EVERY)


class TelegramDraft:
    """Telegram's draft surface: plain-text drafts, the final message through the sender."""

    def __init__(
        self,
        sender: TelegramSender,
        chat_id: int,
        *,
        quote: bool,
        topic: int | None = None,
        reply_to: int | None = None,
    ) -> None:
        self.sender = sender
        self.chat_id = chat_id
        self.topic = topic
        """The forum topic the drafts go into (None: the chat itself)."""
        self.quote = quote
        self.reply_to = reply_to if quote else None
        """The question a group's answer quotes from its first draft on (the final text
        edits that message, so a draft sent without the quote never gets one)."""
        self.where = f"telegram chat {chat_id}"

    def preview(self, text: str, label: str | None) -> str:
        """The answer so far with an ellipsis; before any text, the progress label.

        Cut to Telegram's limit in UTF-16 units, its unit (an emoji is two), never in
        Python characters: a longer draft is refused and the preview would stop.
        """
        body = text.strip()
        if not body:
            return cut_utf16(label or "", MAX_MESSAGE)
        return cut_utf16(body, MAX_MESSAGE - 2).rstrip() + " …"

    async def post(self, text: str) -> str:
        """Send the first draft (plain text: half-streamed Markdown is not valid HTML)."""
        return str(
            await self.sender.send(self.chat_id, None, text, self.reply_to, topic=self.topic)
        )

    async def edit(self, draft: str, text: str) -> None:
        """Edit the draft."""
        await self.sender.edit(self.chat_id, int(draft), None, text, topic=self.topic)

    async def replace(self, draft: str, msg: OutboundMessage) -> Receipt:
        """The draft becomes the answer's first piece; the rest follows."""
        return await self.sender.deliver(msg, edit_id=int(draft), quote=self.quote)

    async def send(self, msg: OutboundMessage) -> Receipt:
        """The whole answer as new messages."""
        return await self.sender.deliver(msg, quote=self.quote)


class TelegramStream:
    """Renders one answer in one chat: echo (voice transcript), draft edits, final message.

    The draft itself is the shared ``DraftStream``; Telegram adds the typing indicator and the
    transcript echo, which goes out before any part of the answer.
    """

    def __init__(
        self,
        sender: TelegramSender,
        typing: Typing,
        chat_id: int,
        *,
        edit_interval: float,
        quote: bool,
        echo: Awaitable[None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        after: Callable[[OutboundMessage], Awaitable[None]] | None = None,
        topic: int | None = None,
        reply_to: int | None = None,
    ) -> None:
        self.after = after
        """Runs once the answer is delivered (its voice note, when the user wants one)."""
        self.typing = typing
        self.chat_id = chat_id
        self.draft = DraftStream(
            TelegramDraft(sender, chat_id, quote=quote, topic=topic, reply_to=reply_to),
            interval=edit_interval,
            first_draft_waits=True,
            clock=clock,
        )
        self._echo = echo

    async def _await_echo(self) -> None:
        """The transcript echo (if any) goes out before any part of the answer."""
        if self._echo is not None:
            echo, self._echo = self._echo, None
            try:
                await echo
            except ChannelError as exc:
                log.warning("could not show the transcript in chat %s: %s", self.chat_id, exc)

    async def progress(self, label: str) -> None:
        """Tool progress: shown in the draft while no answer text has streamed yet."""
        await self._await_echo()
        await self.draft.progress(label)

    async def delta(self, text: str) -> None:
        """More answer text: edit the draft when the throttle allows."""
        await self._await_echo()
        await self.draft.delta(text)

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Deliver the answer, turning the draft (if any) into its first part."""
        await self._await_echo()
        self.typing.stop(self.chat_id)
        receipt = await self.draft.finish(msg)
        if self.after is not None:
            await self.after(msg)
        return receipt


def echo_text(transcript: str) -> tuple[str, str]:
    """The transcript shown back to the user, as (HTML, plain)."""
    return f"🎙 <i>{escape(transcript)}</i>", f"🎙 {transcript}"
