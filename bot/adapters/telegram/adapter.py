"""Telegram channel on python-telegram-bot: Update <-> InboundMessage / OutboundMessage.

Long polling by default; webhook mode (secret-token checked) when a webhook URL is set. Every
Bot API call goes through AIORateLimiter (429 retry_after honoured) and the shared retry
helper. The adapter only translates: dedupe, identity and the agent live behind ``on_message``
(dispatch's persisted dedupe key makes a redelivered update harmless, even across restarts).

Helpers: ``events`` (pure Update -> InboundMessage translation), ``format`` (Markdown ->
HTML, splitting, sources), ``send`` (delivery, errors), ``stream`` (typing, the draft surface),
``updates`` (per-chat ordering), ``voice`` (voice notes), ``webhook`` (the webhook server),
``albums`` (photos sent together, read as one message) with ``inbox`` (their items kept in
the database until handled).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from telegram import BotCommand, CallbackQuery, Message, Update
from telegram.constants import ChatType
from telegram.error import Conflict, InvalidToken, TelegramError
from telegram.ext import AIORateLimiter, Application, ContextTypes, TypeHandler
from telegram.request import HTTPXRequest

from bot.adapters.base import UNSUPPORTED, MessageHandler, SenderCheck
from bot.adapters.telegram.albums import Albums
from bot.adapters.telegram.config import AlbumHolder, TelegramConfig
from bot.adapters.telegram.events import (
    from_message,
    from_press,
    person_text,
    picture,
    shared_location,
    stale_press,
    topic_of,
    voice_attachment,
)
from bot.adapters.telegram.inbox import AlbumInbox
from bot.adapters.telegram.pictures import fetch
from bot.adapters.telegram.send import ButtonCodec, TelegramSender, topic_id, translate
from bot.adapters.telegram.stream import TelegramStream, Typing, echo_text
from bot.adapters.telegram.updates import ChatOrderedProcessor
from bot.adapters.telegram.voice import VoiceNotes
from bot.adapters.telegram.webhook import WebhookServer
from bot.clock import Clock
from bot.errors import ChannelError, SynthesisError
from bot.messages import Address, OutboundMessage, Receipt
from bot.speech.fair import FairTranscriber
from bot.speech.synthesize import Synthesizer, spoken_text
from bot.speech.voicenote import ogg_opus
from bot.tls import httpx_context
from storage.db import Database

__all__ = ["STALE_BUTTON", "TelegramAdapter", "TelegramConfig"]

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
ACK_WAIT = 5.0
"""Seconds a webhook request waits for its message to be stored before answering anyway (a
voice note is transcribed first; Telegram itself gives up on a webhook after about a minute)."""
"""Edited messages carry the positions of a live location (other edits are ignored)."""
STALE_BUTTON = "That button has expired. Send me your request again and I'll take it from there."
_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")
TOPIC_NAME_CHARS = 128
"""Telegram's limit on a forum topic's name."""

PTBApp = Application[Any, Any, Any, Any, Any, Any]


class TelegramAdapter:
    """The Telegram channel (a ChannelAdapter and StreamingAdapter)."""

    name = "telegram"

    def __init__(
        self,
        config: TelegramConfig,
        *,
        clock: Clock,
        menu: list[tuple[str, str]] | None = None,
        transcriber: FairTranscriber | None = None,
        is_known: SenderCheck | None = None,
        synthesizer: Synthesizer | None = None,
        db: Database | None = None,
        holder: AlbumHolder | None = None,
    ) -> None:
        self.config = config
        self.db = db
        """Where album items are kept until handled (None: in memory only)."""
        self.holder = holder
        """This process, named in the album items it keeps (None: no heartbeat; the items of
        a process killed are then taken over after ``inbox.ORPHANED`` seconds only)."""
        self.synthesizer = synthesizer
        """Speech output for answers the user wants as voice notes too (None: off)."""
        self.clock = clock
        self.menu = menu or []
        self.transcriber = transcriber
        self.is_known = is_known
        """Asked before a voice note is fetched: strangers get no download, no model time."""
        self.codec = ButtonCodec()
        self.account = ""
        """The bot's user id, known once started."""
        self.username = ""
        self.webhook: WebhookServer | None = None
        self._app: PTBApp | None = None
        self._sender: TelegramSender | None = None
        self._typing: Typing | None = None
        self._voice: VoiceNotes | None = None
        self._handler: MessageHandler | None = None
        self._echoes: dict[tuple[int, int], str] = {}
        self._stored: dict[tuple[int, int], asyncio.Event] = {}
        """Webhook requests waiting for their message to be stored, by (chat, message id)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._used_keyboards: OrderedDict[tuple[int, int], None] = OrderedDict()
        self._albums = Albums(self._on_album, quiet=config.album_quiet)
        """Items of albums (photos sent together) held until the whole album is in."""

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self, on_message: MessageHandler) -> None:
        """Connect (getMe), register the command menu, then poll or listen for the webhook."""
        cfg = self.config
        tls = {"verify": httpx_context()}
        builder = (
            Application.builder()
            .token(cfg.token)
            .base_url(cfg.api_url)
            .base_file_url(cfg.base_file_url)
            .rate_limiter(AIORateLimiter(max_retries=cfg.retries))
            # The requests the builder would make, with the process's one TLS context.
            .request(HTTPXRequest(connection_pool_size=256, httpx_kwargs=tls))
            .get_updates_request(HTTPXRequest(connection_pool_size=1, httpx_kwargs=tls))
            .concurrent_updates(ChatOrderedProcessor())
            .job_queue(None)
        )
        if cfg.webhook_url:
            builder = builder.updater(None)
        app: PTBApp = builder.build()
        app.add_handler(TypeHandler(Update, self._on_update))
        app.add_error_handler(self._on_ptb_error)
        self._handler = on_message
        self._app = app
        try:
            await app.initialize()
        except TelegramError as exc:
            self._app = None
            await app.bot.shutdown()  # close the HTTP clients initialize() opened
            raise translate(exc, "getMe") from None if isinstance(exc, InvalidToken) else exc
        self.account, self.username = str(app.bot.id), app.bot.username or ""
        self._sender = TelegramSender(app.bot, retries=cfg.retries, codec=self.codec)
        self._typing = Typing(self._sender)
        self._voice = VoiceNotes(
            app.bot,
            self._sender,
            self.transcriber,
            max_bytes=cfg.max_voice_bytes,
            workdir=cfg.workdir,
        )
        if self.db is not None:
            self._albums.store = AlbumInbox(self.db, self.account, app.bot, self.clock, self.holder)
        try:
            await self._register_commands()
            await app.start()
            # Before any new update: the albums a killed process took and never handled.
            await self._albums.recover(starting=True)
            self._albums.recover_every(cfg.album_recover_every)
            if cfg.webhook_url:
                await self._start_webhook(app, cfg.webhook_url)
            else:
                assert app.updater is not None
                await app.updater.start_polling(
                    timeout=int(cfg.poll_timeout),
                    allowed_updates=ALLOWED_UPDATES,
                    error_callback=self._poll_error,
                )
        except BaseException:
            await self.stop()
            raise
        log.info(
            "Telegram bot @%s started (%s)",
            self.username,
            "webhook" if cfg.webhook_url else "polling",
        )

    async def _start_webhook(self, app: PTBApp, url: str) -> None:
        secret = self.config.derived_webhook_secret

        async def sink(data: dict[str, Any]) -> None:
            update = Update.de_json(data, app.bot)
            key = _message_key(update)
            if key is None:
                await app.update_queue.put(update)
                return
            # Answer Telegram (or the load balancer) only once the message is stored: the next
            # message of the chat, sent after this answer, then lands after it in the database,
            # whichever process it reaches, and dispatch keeps the two in order.
            stored = self._stored.setdefault(key, asyncio.Event())
            await app.update_queue.put(update)
            try:
                await asyncio.wait_for(stored.wait(), ACK_WAIT)
            except TimeoutError:
                log.info("answered a webhook update before its message was stored")
            finally:
                self._stored.pop(key, None)

        self.webhook = WebhookServer(
            path=urlsplit(url).path or "/",
            secret=secret,
            listen=self.config.webhook_listen,
            port=self.config.webhook_port,
            sink=sink,
        )
        await self.webhook.start()
        await self.sender.call(
            "setWebhook",
            lambda: app.bot.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES),
        )

    async def _register_commands(self) -> None:
        commands = [
            BotCommand(name, (desc or name)[:256])
            for name, desc in self.menu
            if _COMMAND_NAME.match(name)
        ]
        if not commands:
            return
        try:
            await self.sender.call(
                "setMyCommands", lambda: self.sender.bot.set_my_commands(commands)
            )
        except ChannelError as exc:
            # The menu is a convenience: typed commands work without it.
            log.warning("could not register the command menu: %s", exc)

    async def stop(self) -> None:
        """Stop receiving, finish updates in progress, release connections."""
        app, self._app = self._app, None
        if app is None:
            return
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        if self.webhook is not None:
            await self.webhook.stop()
        if app.running:
            await app.stop()
        await self._albums.close()  # an album still being received is handled, not lost
        if self._typing is not None:
            await self._typing.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await app.shutdown()

    @property
    def sender(self) -> TelegramSender:
        """The delivery helper (available once started)."""
        if self._sender is None:
            raise ChannelError("the Telegram channel is not running")
        return self._sender

    # --- outbound ----------------------------------------------------------------------------
    async def send(self, msg: OutboundMessage) -> Receipt:
        """Send a whole message (split, formatted, with buttons and sources)."""
        chat_id = _chat_id(msg)
        if self._typing is not None:
            self._typing.stop(chat_id)
        if msg.image is not None:
            # The picture first, then the words (which describe it too), as one reply.
            await self.sender.photo(chat_id, msg.image, topic=topic_id(msg.address))
        receipt = await self.sender.deliver(msg, quote=chat_id < 0)
        await self.say(msg)
        return receipt

    async def say(self, msg: OutboundMessage) -> None:
        """After the text: the same answer as a voice note, when the user wants it.

        The text is the answer; the voice note is a courtesy, so a failure is only logged.
        """
        if not msg.speak or self.synthesizer is None or not msg.text.strip():
            return
        try:
            speech = await self.synthesizer.synthesize(spoken_text(msg.text))
            ogg = await asyncio.to_thread(ogg_opus, speech)
            await self.sender.voice(int(msg.address.chat_id), ogg, topic=topic_id(msg.address))
        except (SynthesisError, ChannelError) as exc:
            log.warning("telegram: the voice note of an answer was not sent: %s", exc)

    async def open_topic(self, address: Address, title: str) -> Address:
        """Create a forum topic (a supergroup's, or a private chat's with topics on)."""
        chat_id = int(address.chat_id)
        topic = await self.sender.call(
            "createForumTopic",
            lambda: self.sender.bot.create_forum_topic(chat_id, title[:TOPIC_NAME_CHARS]),
        )
        return replace(address, thread_id=str(topic.message_thread_id))

    def open_stream(self, address: Address, reply_to: str | None) -> TelegramStream:
        """Render an answer as it streams; a voice note's transcript is shown first."""
        chat_id = int(address.chat_id)
        echo: asyncio.Task[None] | None = None
        key = (chat_id, int(reply_to)) if reply_to and reply_to.isdigit() else None
        if key is not None and key in self._echoes:
            echo = self._spawn(
                self._send_echo(chat_id, key[1], self._echoes.pop(key), topic_id(address))
            )
        assert self._typing is not None
        return TelegramStream(
            self.sender,
            self._typing,
            chat_id,
            edit_interval=self.config.edit_interval,
            quote=chat_id < 0,
            echo=echo,
            after=self.say,
            topic=topic_id(address),
            reply_to=key[1] if key is not None else None,
        )

    async def _send_echo(
        self, chat_id: int, reply_to: int, transcript: str, topic: int | None
    ) -> None:
        html_text, plain = echo_text(transcript)
        await self.sender.send(chat_id, html_text, plain, reply_to, topic=topic)

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _notice(self, chat_id: int, reply_to: int | None, text: str) -> None:
        try:
            await self.sender.send(chat_id, None, text, reply_to)
        except ChannelError as exc:
            log.warning("could not tell chat %s about a problem: %s", chat_id, exc)

    # --- inbound -----------------------------------------------------------------------------
    def _mark_stored(self, key: tuple[int, int] | None) -> None:
        """Release the webhook request waiting for this message (if any)."""
        if key is not None and (waiting := self._stored.get(key)) is not None:
            waiting.set()

    async def _on_update(self, update: Update, _context: ContextTypes.DEFAULT_TYPE) -> None:
        key = _message_key(update)
        try:
            if update.message is not None and Albums.is_item(update.message):
                # Answered once kept and held, not once stored as a message: Telegram sends a
                # chat's next update only after this one is answered, and the album needs it.
                await self._albums.add(update.message)
                return
            if update.message is not None:
                # An album of this chat received before goes first: the chat's order holds
                # (button presses skip the chat's queue, as in ChatOrderedProcessor).
                await self._albums.flush(update.message.chat.id)
            if update.callback_query is not None:
                await self._on_callback(update.callback_query)
            elif update.message is not None:
                if update.message.location is not None:
                    await self._on_location(update.message, edited=False)
                else:
                    await self._on_message(update.message)
            elif update.edited_message is not None and update.edited_message.location is not None:
                await self._on_location(update.edited_message, edited=True)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("failed to handle Telegram update %s", update.update_id)
        finally:
            self._mark_stored(key)  # dropped, held or done: never keep a webhook request waiting

    async def _on_ptb_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("Telegram update failed: %r", context.error, exc_info=context.error)

    def _poll_error(self, exc: TelegramError) -> None:
        if isinstance(exc, Conflict):
            log.error("another process polls this bot token, or a webhook is set: %s", exc)
        elif isinstance(exc, InvalidToken):
            log.error("Telegram rejected TELEGRAM_BOT_TOKEN: %s", exc)
        else:
            log.warning("polling Telegram failed (%s); retrying", exc)

    async def _on_message(self, message: Message) -> None:
        text = person_text(
            message,
            allow_groups=self.config.allow_groups,
            bot_id=int(self.account),
            username=self.username,
        )
        if text is None:
            return
        chat = message.chat
        media = message.voice or message.audio
        attachment = voice_attachment(message)
        pic = picture(message)
        assert self._typing is not None
        assert self._voice is not None
        assert self._handler is not None
        sender_id = str(message.from_user.id) if message.from_user is not None else ""
        if (media is not None or pic is not None) and not await self._known(sender_id):
            # A stranger: the pairing reply needs no transcript, so nothing is fetched.
            text = text or ("(voice note)" if media is not None else "(photo)")
            media = pic = None
        async with self._typing.during(chat.id, _topic(message)):
            if pic is not None:
                got = await fetch(
                    self.sender.bot, self.sender, pic, limit=self.config.max_image_bytes
                )
                if isinstance(got, str):
                    await self._notice(chat.id, message.message_id, got)
                    return
                attachment = got
            elif media is not None:
                result = await self._voice.transcribe(media, key=f"{self.name}:{sender_id}")
                if result.text is None:
                    await self._notice(chat.id, message.message_id, result.problem or UNSUPPORTED)
                    return
                text = result.text
                self._echoes[(chat.id, message.message_id)] = text
            elif not text.strip():
                if message.effective_attachment is not None:
                    await self._notice(chat.id, message.message_id, UNSUPPORTED)
                return
            inbound = from_message(
                message,
                account=self.account,
                text=text,
                attachments=[attachment] if attachment is not None else [],
            )
            inbound.accepted = functools.partial(self._mark_stored, (chat.id, message.message_id))
            try:
                await self._handler(inbound)
            finally:
                self._echoes.pop((chat.id, message.message_id), None)

    async def _on_album(self, messages: list[Message], stored: Callable[[], None]) -> None:
        """An album's items as one message: every picture, and the caption(s) as its text.

        ``stored``: called once dispatch has stored it (its items may then be let go).
        """
        said = [
            person_text(
                m,
                allow_groups=self.config.allow_groups,
                bot_id=int(self.account),
                username=self.username,
            )
            for m in messages
        ]
        if all(t is None for t in said):
            return  # not for us (a group's album that does not address the bot)
        first = messages[0]
        chat = first.chat
        text = "\n".join(t for t in said if t)
        pics = [p for m in messages if (p := picture(m)) is not None]
        sender_id = str(first.from_user.id) if first.from_user is not None else ""
        assert self._typing is not None
        assert self._handler is not None
        if not await self._known(sender_id):
            # A stranger: the pairing reply needs no pictures, so nothing is fetched.
            text, pics = text or "(photo)", []
        attachments = []
        async with self._typing.during(chat.id, _topic(first)):
            for pic in pics:
                got = await fetch(
                    self.sender.bot, self.sender, pic, limit=self.config.max_image_bytes
                )
                if isinstance(got, str):
                    await self._notice(chat.id, first.message_id, got)
                    continue
                attachments.append(got)
            if not text.strip() and not attachments:
                if not pics and any(m.effective_attachment is not None for m in messages):
                    await self._notice(chat.id, first.message_id, UNSUPPORTED)
                return
            inbound = from_message(first, account=self.account, text=text, attachments=attachments)
            inbound.accepted = stored
            await self._handler(inbound)

    async def _known(self, sender_id: str) -> bool:
        return self.is_known is None or await self.is_known(self.name, self.account, sender_id)

    async def _on_location(self, message: Message, *, edited: bool) -> None:
        inbound = shared_location(message, account=self.account, edited=edited)
        if inbound is None:
            return
        assert self._handler is not None
        await self._handler(inbound)

    async def _on_callback(self, query: CallbackQuery) -> None:
        answered = False
        try:
            msg = query.message
            data = None
            if isinstance(msg, Message) and not stale_press(query, msg, self._used_keyboards):
                data = self.codec.decode(query.data or "")
            if data is None or not isinstance(msg, Message):
                await self._answer(query, STALE_BUTTON)
                answered = True
                return
            await self._answer(query, None)
            answered = True
            if msg.chat.type != ChatType.PRIVATE and not self.config.allow_groups:
                return
            await self._retire_keyboard(msg)
            assert self._typing is not None
            assert self._handler is not None
            inbound = from_press(
                query, msg, account=self.account, data=data, received_at=self.clock.now()
            )
            async with self._typing.during(msg.chat.id, _topic(msg)):
                await self._handler(inbound)
        finally:
            if not answered:
                await self._answer(query, None)

    async def _answer(self, query: CallbackQuery, text: str | None) -> None:
        """answerCallbackQuery: stops the button's spinner (always called, once)."""
        try:
            await self.sender.call(
                "answerCallbackQuery",
                lambda: self.sender.bot.answer_callback_query(query.id, text=text),
            )
        except ChannelError as exc:
            log.warning("could not answer a button press: %s", exc)

    async def _retire_keyboard(self, msg: Message) -> None:
        """Buttons work once: remove the keyboard so a second press cannot repeat the action."""
        key = (msg.chat.id, msg.message_id)
        self._used_keyboards[key] = None
        while len(self._used_keyboards) > 4096:
            self._used_keyboards.popitem(last=False)
        try:
            await self.sender.call(
                "editMessageReplyMarkup",
                lambda: self.sender.bot.edit_message_reply_markup(
                    chat_id=msg.chat.id, message_id=msg.message_id, reply_markup=None
                ),
            )
        except ChannelError as exc:
            log.info("could not remove a used keyboard: %s", exc)


def _chat_id(msg: OutboundMessage) -> int:
    try:
        return int(msg.address.chat_id)
    except ValueError:
        raise ChannelError(f"{msg.address.chat_id!r} is not a Telegram chat id") from None


def _topic(message: Message) -> int | None:
    """The topic a message is in, as the Bot API's message_thread_id (None: the chat)."""
    topic = topic_of(message)
    return int(topic) if topic is not None else None


def _message_key(update: Update) -> tuple[int, int] | None:
    """(chat id, message id) of an update's new message; None for anything else."""
    message = update.message
    return (message.chat.id, message.message_id) if message is not None else None
