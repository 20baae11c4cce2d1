"""Sending to Telegram: retries, error translation, HTML with a plain fallback, keyboards.

Every Bot API call of the adapter goes through ``TelegramSender.call``: network errors are
retried with backoff (the shared ``retry_transient``), 429s were already retried by PTB's
AIORateLimiter honouring ``retry_after``, and what is left is translated into lifebot's error
tree (403 -> Unreachable, 429 -> RateLimited, network -> TransientChannelError).
"""

from __future__ import annotations

import functools
import itertools
import logging
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    ReplyParameters,
)
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.warnings import PTBDeprecationWarning

from bot.adapters.telegram.format import (
    MAX_CALLBACK_BYTES,
    MAX_MESSAGE,
    markdown_to_html,
    sources_html,
    sources_plain,
    split_text,
    utf16_len,
)
from bot.errors import ChannelError, RateLimited, TransientChannelError, Unreachable
from bot.messages import Address, Button, Image, OutboundMessage, Receipt
from bot.retry import retry_transient

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_CAPTION = 1024
"""Telegram's limit on a photo caption."""
_LONG_DATA_PREFIX = "lb:"
_PERMANENT_BAD_REQUESTS = ("chat not found", "user not found", "bot was kicked", "have no rights")


def topic_id(address: Address) -> int | None:
    """The forum topic of an address (its ``thread_id``), as Telegram's integer, if any."""
    thread = address.thread_id
    return int(thread) if thread and thread.lstrip("-").isdigit() else None


def retry_after_seconds(exc: RetryAfter) -> float:
    """The peer's retry_after in seconds (PTB 22 warns when the int form is read)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _classify(exc: BaseException) -> float | None:
    # BadRequest subclasses NetworkError in PTB, but a bad request never gets better.
    if isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):
        return 0.0
    return None


def translate(exc: TelegramError, what: str) -> ChannelError:  # noqa: PLR0911  (a flat ladder)
    """A PTB error as the matching lifebot ChannelError."""
    text = f"Telegram {what} failed: {exc.message}"
    if isinstance(exc, Forbidden):
        return Unreachable(text)
    if isinstance(exc, RetryAfter):
        return RateLimited(text, retry_after_seconds(exc))
    if isinstance(exc, BadRequest):
        if any(p in exc.message.lower() for p in _PERMANENT_BAD_REQUESTS):
            return Unreachable(text)
        return ChannelError(text)
    if isinstance(exc, InvalidToken):
        # PTB's message quotes the token itself: never let it reach a log.
        return ChannelError("Telegram rejected TELEGRAM_BOT_TOKEN; copy it again from @BotFather")
    if isinstance(exc, ChatMigrated):
        return Unreachable(f"{text} (the group became a supergroup {exc.new_chat_id})")
    if isinstance(exc, NetworkError):
        return TransientChannelError(text)
    return ChannelError(text)


def is_parse_error(exc: BaseException) -> bool:
    """Telegram refused the markup (400 "can't parse entities")."""
    return isinstance(exc, BadRequest) and "can't parse entities" in exc.message.lower()


def is_not_modified(exc: BaseException) -> bool:
    """An edit that changed nothing (harmless)."""
    return isinstance(exc, BadRequest) and "message is not modified" in exc.message.lower()


class ButtonCodec:
    """Button data <-> callback data; data over Telegram's 64 bytes is kept here by token."""

    def __init__(self, capacity: int = 2048) -> None:
        self._long: OrderedDict[str, str] = OrderedDict()
        self._ids = itertools.count(1)
        self._capacity = capacity

    def encode(self, data: str) -> str:
        """The callback data to put on the wire."""
        if len(data.encode()) <= MAX_CALLBACK_BYTES and not data.startswith(_LONG_DATA_PREFIX):
            return data
        token = f"{_LONG_DATA_PREFIX}{next(self._ids)}"
        self._long[token] = data
        while len(self._long) > self._capacity:
            self._long.popitem(last=False)
        return token

    def decode(self, wire: str) -> str | None:
        """The button's data, or None when the token is unknown (e.g. after a restart)."""
        if wire.startswith(_LONG_DATA_PREFIX):
            return self._long.get(wire)
        return wire

    def keyboard(self, buttons: list[Button]) -> InlineKeyboardMarkup | None:
        """An inline keyboard: short labels two to a row, long ones alone."""
        if not buttons:
            return None
        rows: list[list[InlineKeyboardButton]] = []
        last_row: int | None = None
        for b in buttons:
            button = InlineKeyboardButton(b.label, callback_data=self.encode(b.data))
            if b.row is not None:  # the sender laid the rows out (Accept / Decline / Rename)
                if rows and b.row == last_row:
                    rows[-1].append(button)
                else:
                    rows.append([button])
                last_row = b.row
            elif rows and len(rows[-1]) == 1 and max(len(b.label), len(rows[-1][0].text)) <= 16:
                rows[-1].append(button)
            else:
                rows.append([button])
        return InlineKeyboardMarkup(rows)


def render(msg: OutboundMessage) -> list[tuple[str, str]]:
    """The message as (HTML, plain) pieces, each within Telegram's length limit.

    Sources go with the last piece when they fit, else in a piece of their own.
    """
    pieces = split_text(msg.text) or ["…"]
    out = [(markdown_to_html(p), p) for p in pieces]
    if msg.citations:
        html_src, plain_src = sources_html(msg.citations), sources_plain(msg.citations)
        last_html, last_plain = out[-1]
        if utf16_len(last_plain) + utf16_len(plain_src) + 2 <= MAX_MESSAGE:
            out[-1] = (f"{last_html}\n\n{html_src}", f"{last_plain}\n\n{plain_src}")
        else:
            out.append((html_src, plain_src))
    return out


class TelegramSender:
    """Delivers OutboundMessages through a PTB Bot."""

    def __init__(self, bot: Bot, *, retries: int, codec: ButtonCodec) -> None:
        self.bot = bot
        self.retries = retries
        self.codec = codec

    async def call(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Run one Bot API call with network retries; raise lifebot errors."""
        try:
            return await retry_transient(
                fn, classify=_classify, attempts=self.retries, what=f"Telegram {what}"
            )
        except TelegramError as exc:
            raise translate(exc, what) from exc

    async def deliver(
        self, msg: OutboundMessage, *, edit_id: int | None = None, quote: bool = False
    ) -> Receipt:
        """Send (or finish the draft ``edit_id`` with) the message; receipt = first piece."""
        chat_id = int(msg.address.chat_id)
        topic = topic_id(msg.address)
        pieces = render(msg)
        markup = self.codec.keyboard(msg.buttons)
        reply_to = int(msg.reply_to) if quote and msg.reply_to and msg.reply_to.isdigit() else None
        first: int | None = None
        for i, (html_text, plain) in enumerate(pieces):
            keys = markup if i == len(pieces) - 1 else None
            if i == 0 and edit_id is not None:
                mid = await self.edit(chat_id, edit_id, html_text, plain, keys, topic=topic)
            else:
                quoted = reply_to if i == 0 else None
                mid = await self.send(chat_id, html_text, plain, quoted, keys, topic=topic)
            first = first if first is not None else mid
        assert first is not None
        return Receipt("telegram", str(first), str(chat_id))

    async def photo(self, chat_id: int, image: Image, *, topic: int | None = None) -> int:
        """Send a picture (sendPhoto, uploaded as a file); its caption is its short alt text."""
        caption = image.alt if len(image.alt) <= MAX_CAPTION else image.alt[: MAX_CAPTION - 1] + "…"

        async def attempt() -> Message:
            return await self.bot.send_photo(
                chat_id,
                photo=image.data,
                caption=caption,
                filename=image.name,
                message_thread_id=topic,
            )

        return (await self.call("sendPhoto", attempt)).id

    async def voice(self, chat_id: int, ogg: bytes, *, topic: int | None = None) -> int:
        """Send an OGG/Opus voice note (sendVoice, uploaded as a file)."""

        async def attempt() -> Message:
            return await self.bot.send_voice(
                chat_id, voice=ogg, filename="answer.ogg", message_thread_id=topic
            )

        return (await self.call("sendVoice", attempt)).id

    async def send(
        self,
        chat_id: int,
        html_text: str | None,
        plain: str,
        reply_to: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
        *,
        topic: int | None = None,
    ) -> int:
        """Send HTML; if Telegram refuses the markup, the same message as plain text.

        ``topic`` is the forum topic (``message_thread_id``) the message goes into.
        """
        params = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None

        async def attempt(text: str, mode: str | None) -> Message:
            return await self.bot.send_message(
                chat_id,
                text,
                parse_mode=mode,
                reply_markup=markup,
                reply_parameters=params,
                message_thread_id=topic,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )

        if html_text is not None:
            try:
                return (
                    await self._raw("sendMessage", lambda: attempt(html_text, ParseMode.HTML))
                ).id
            except BadRequest as exc:
                if not is_parse_error(exc):
                    raise translate(exc, "sendMessage") from exc
                log.warning("Telegram refused our HTML (%s); sending plain text", exc.message)
        return (await self.call("sendMessage", lambda: attempt(plain, None))).id

    async def edit(
        self,
        chat_id: int,
        message_id: int,
        html_text: str | None,
        plain: str,
        markup: InlineKeyboardMarkup | None = None,
        *,
        topic: int | None = None,
    ) -> int:
        """Replace a message's text (HTML, else plain); a vanished one is sent anew in ``topic``."""

        async def attempt(text: str, mode: str | None) -> object:
            return await self.bot.edit_message_text(
                text,
                chat_id=chat_id,
                message_id=message_id,
                parse_mode=mode,
                reply_markup=markup,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )

        for text, mode in ((html_text, ParseMode.HTML), (plain, None)):
            if text is None:
                continue
            try:
                await self._raw("editMessageText", functools.partial(attempt, text, mode))
            except BadRequest as exc:
                if is_not_modified(exc):
                    return message_id
                if "message to edit not found" in exc.message.lower():
                    return await self.send(chat_id, html_text, plain, None, markup, topic=topic)
                if not is_parse_error(exc) or mode is None:
                    raise translate(exc, "editMessageText") from exc
                log.warning("Telegram refused our HTML (%s); editing as plain text", exc.message)
                continue
            return message_id
        return message_id

    async def _raw(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Like ``call`` but lets BadRequest through untranslated, for fallbacks."""
        try:
            return await retry_transient(
                fn, classify=_classify, attempts=self.retries, what=f"Telegram {what}"
            )
        except BadRequest:
            raise
        except TelegramError as exc:
            raise translate(exc, what) from exc
