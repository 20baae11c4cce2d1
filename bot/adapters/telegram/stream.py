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

from bot.adapters.telegram.format import MAX_MESSAGE, escape, utf16_len
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
    async def during(self, chat_id: int) -> AsyncIterator[None]:
        """Show "typing…" in ``chat_id`` while the block runs (or until a reply is sent)."""
        self.stop(chat_id)
        task = asyncio.create_task(self._loop(chat_id), name=f"telegram-typing-{chat_id}")
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

    async def _loop(self, chat_id: int) -> None:
        await asyncio.sleep(TYPING_FIRST_AFTER)
        deadline = time.monotonic() + TYPING_AT_MOST
        while time.monotonic() < deadline:
            try:
                await self.sender.bot.send_chat_action(chat_id, ChatAction.TYPING)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001  (a missing indicator is never worth a failure)
                log.debug("typing indicator failed in chat %s: %s", chat_id, exc)
            await asyncio.sleep(TYPING_EVERY)


class TelegramStream:
    """Renders one answer in one chat: echo (voice transcript), draft edits, final message."""

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
    ) -> None:
        self.sender = sender
        self.typing = typing
        self.chat_id = chat_id
        self.edit_interval = edit_interval
        self.quote = quote
        self.clock = clock
        self.text = ""
        self.draft_id: int | None = None
        self._shown = ""
        self._last = clock()
        self._broken = False
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
        if not self.text and not self._broken and self.clock() - self._last >= self.edit_interval:
            await self._show(label)

    async def delta(self, text: str) -> None:
        """More answer text: edit the draft when the throttle allows."""
        await self._await_echo()
        self.text += text
        if self._broken or self.clock() - self._last < self.edit_interval:
            return
        await self._show(self.text.strip() + " …")

    async def _show(self, text: str) -> None:
        if not text.strip() or text == self._shown:
            return
        if utf16_len(text) > MAX_MESSAGE:
            text = text[: MAX_MESSAGE - 2] + " …"
        self._last = self.clock()
        try:
            if self.draft_id is None:
                self.draft_id = await self.sender.send(self.chat_id, None, text)
            else:
                await self.sender.edit(self.chat_id, self.draft_id, None, text)
            self._shown = text
        except ChannelError as exc:
            # The final message still goes out; only the live preview stops.
            log.warning("stopped streaming in chat %s: %s", self.chat_id, exc)
            self._broken = True

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """Deliver the answer, turning the draft (if any) into its first part."""
        await self._await_echo()
        self.typing.stop(self.chat_id)
        return await self.sender.deliver(msg, edit_id=self.draft_id, quote=self.quote)


def echo_text(transcript: str) -> tuple[str, str]:
    """The transcript shown back to the user, as (HTML, plain)."""
    return f"🎙 <i>{escape(transcript)}</i>", f"🎙 {transcript}"
