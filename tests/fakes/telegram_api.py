"""A loopback fake of Telegram's Bot API, so the real python-telegram-bot code runs in tests.

It speaks the Bot API over HTTP (``/bot<token>/<method>`` and ``/file/bot<token>/<path>``):
getMe, getUpdates (long polling, offsets, redelivery), sendMessage, sendPhoto (a multipart
upload, kept in ``photos``), editMessageText,
editMessageReplyMarkup, sendChatAction, answerCallbackQuery, setMyCommands, getFile plus the
file download, setWebhook / deleteWebhook (updates are then POSTed to the webhook with the
secret-token header). Errors are scriptable: 429 with ``retry_after``, 403 blocked, 400
"can't parse entities" (and real strict HTML parsing raises that too), 502 for network trouble.
Every call is recorded with its arrival time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.telegram_html import ParseError, parse_html, utf16_len

TOKEN = "123456:TEST-fake-token-abcdefghijklmnop"
BOT_ID = 123456
BOT_USERNAME = "lifebot_test_bot"
MAX_TEXT = 4096
MAX_DOWNLOAD = 20 * 1024 * 1024
_JSON_PARAMS = {
    "reply_markup",
    "entities",
    "allowed_updates",
    "commands",
    "reply_parameters",
    "link_preview_options",
    "scope",
}


@dataclass
class Call:
    """One API request as the fake received it."""

    method: str
    params: dict[str, Any]
    at: float
    """time.perf_counter() on arrival."""


@dataclass
class Fault:
    """A scripted error answer."""

    method: str
    status: int
    description: str
    times: int = 1
    retry_after: int | None = None
    chat_id: int | None = None


@dataclass
class BotMessage:
    """A message the bot sent, as the user currently sees it."""

    chat_id: int
    message_id: int
    text: str
    """Visible text (HTML parsed away)."""
    source: str
    parse_mode: str | None
    entities: list[dict[str, Any]]
    reply_markup: dict[str, Any] | None = None
    reply_to: int | None = None
    edits: list[str] = field(default_factory=list)
    """Earlier visible texts, oldest first."""
    topic: int | None = None
    """The forum topic (``message_thread_id``) the message was sent into, if any."""

    def buttons(self) -> list[dict[str, Any]]:
        """The inline keyboard's buttons, flattened."""
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [b for row in rows for b in row]


@dataclass
class SentPhoto:
    """A picture the bot uploaded with sendPhoto."""

    chat_id: int
    message_id: int
    data: bytes
    caption: str
    filename: str
    content_type: str


@dataclass
class SentVoice:
    """A voice note the bot uploaded with sendVoice (checked to be OGG/Opus)."""

    chat_id: int
    message_id: int
    data: bytes


class ApiError(Exception):
    """Answered as ``{"ok": false, ...}``."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


class FakeTelegram:
    """The server. Start it, point PTB's ``base_url`` at ``api_url``, script, assert."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.url = ""
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self.blocked: set[int] = set()
        self.topic_chats: set[int] = set()
        """Chats that can hold topics (``createForumTopic`` works there)."""
        self.topics: dict[int, dict[int, str]] = {}
        """Topics created through the API: chat id -> topic id -> name."""
        self.sent: dict[int, list[BotMessage]] = {}
        self.photos: dict[int, list[SentPhoto]] = {}
        self.voices: dict[int, list[SentVoice]] = {}
        self.files: dict[str, tuple[str, bytes]] = {}
        self.chats: dict[int, dict[str, Any]] = {}
        self.commands: list[dict[str, str]] = []
        self.webhook_url: str | None = None
        self.webhook_secret: str | None = None
        self.pushed_at: dict[int, float] = {}
        """update_id -> time.perf_counter() when the update was made available."""
        self._pending: list[dict[str, Any]] = []
        self._redeliver: list[dict[str, Any]] = []
        self._history: dict[int, dict[str, Any]] = {}
        self._update_ids = itertools.count(1000)
        self._msg_ids: dict[int, itertools.count[int]] = {}
        self._cb_ids = itertools.count(1)
        self._file_ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._closing = False
        self._stalls: dict[str, asyncio.Event] = {}
        """Methods whose calls hang until released, then fail unrecorded (see ``stall``)."""
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def api_url(self) -> str:
        """The value for ``base_url`` (PTB appends the token)."""
        return f"{self.url}/bot"

    @property
    def file_url(self) -> str:
        """The value for ``base_file_url``."""
        return f"{self.url}/file/bot"

    async def start(self) -> str:
        """Listen on a free loopback port; return the base URL."""
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        """End long polls and shut down."""
        self._closing = True
        for method in list(self._stalls):
            self.release(method)
        await self._notify()
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- scripting ---------------------------------------------------------------------------
    def fail(
        self,
        method: str,
        status: int,
        description: str,
        *,
        times: int = 1,
        retry_after: int | None = None,
        chat_id: int | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with an error."""
        self.faults.append(Fault(method, status, description, times, retry_after, chat_id))

    def stall(self, method: str) -> None:
        """Calls of ``method`` hang (recorded in ``calls``, nothing sent) until ``release``.

        A client killed meanwhile never learns what happened: the "did it arrive?" moment.
        """
        self._stalls[method] = asyncio.Event()

    def release(self, method: str) -> None:
        """Let stalled calls of ``method`` end, as errors: Telegram never took those messages."""
        event = self._stalls.pop(method, None)
        if event is not None:
            event.set()

    def block(self, chat_id: int) -> None:
        """The user blocked the bot: sends to this chat get 403."""
        self.blocked.add(chat_id)

    def add_file(self, data: bytes, path: str) -> tuple[str, str]:
        """Store a downloadable file; return (file_id, file_unique_id)."""
        n = next(self._file_ids)
        self.files[f"file-{n}"] = (path, data)
        return f"file-{n}", f"uniq-{n}"

    # --- updates -----------------------------------------------------------------------------
    def next_message_id(self, chat_id: int) -> int:
        """Message ids count up per chat, shared by user and bot messages."""
        return next(self._msg_ids.setdefault(chat_id, itertools.count(1)))

    def user(self, user_id: int, name: str = "Ana") -> dict[str, Any]:
        """A user object."""
        return {"id": user_id, "is_bot": False, "first_name": name, "language_code": "en"}

    def bot_user(self) -> dict[str, Any]:
        """The bot's own user object."""
        return {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "lifebot",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def chat(self, chat_id: int) -> dict[str, Any]:
        """The chat object for ``chat_id`` (a private chat unless made a group)."""
        return self.chats.setdefault(
            chat_id, {"id": chat_id, "type": "private", "first_name": "Ana"}
        )

    def in_topic(
        self, chat_id: int, thread_id: int, *, opened_by_bot: bool = False, user_id: int = 0
    ) -> dict[str, Any]:
        """The fields Telegram puts on a message sent in topic ``thread_id`` (not a reply).

        Such a message names the topic's first message, the service message that opened it
        (``forum_topic_created``, whose id is the topic's id), as the one it replies to
        (tdlib/telegram-bot-api#356). Pass them to ``send_text`` and the like.
        """
        opener = self.bot_user() if opened_by_bot else self.user(user_id or chat_id)
        root = {
            "message_id": thread_id,
            "message_thread_id": thread_id,
            "date": int(time.time()),
            "chat": self.chat(chat_id),
            "from": opener,
            "forum_topic_created": {"name": "Topic", "icon_color": 7322096},
            "is_topic_message": True,
        }
        return {"message_thread_id": thread_id, "is_topic_message": True, "reply_to_message": root}

    def enable_topics(self, chat_id: int) -> None:
        """Let ``chat_id`` hold topics (a forum, or a private chat with topics turned on)."""
        self.topic_chats.add(chat_id)

    def make_group(self, chat_id: int, title: str = "Family") -> None:
        """Register ``chat_id`` as a supergroup."""
        self.chats[chat_id] = {"id": chat_id, "type": "supergroup", "title": title}

    def message(
        self,
        chat_id: int,
        text: str | None = None,
        *,
        user_id: int | None = None,
        name: str = "Ana",
        message_id: int | None = None,
        reply_to: int | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A user's message object (text, or pass voice=/audio=/entities=... in ``extra``)."""
        msg: dict[str, Any] = {
            "message_id": message_id or self.next_message_id(chat_id),
            "date": int(time.time()),
            "chat": self.chat(chat_id),
            "from": self.user(user_id or chat_id, name),
        }
        if text is not None:
            msg["text"] = text
            if entities := _auto_entities(text):
                msg["entities"] = entities
        if reply_to is not None:
            msg["reply_to_message"] = self._bot_message_dict(self.find(chat_id, reply_to))
        msg.update(extra)
        return msg

    async def send_text(self, chat_id: int, text: str, **kw: Any) -> int:
        """The user sends ``text``; return the update id."""
        return await self.push({"message": self.message(chat_id, text, **kw)})

    async def send_voice(
        self, chat_id: int, data: bytes, *, duration: int = 2, audio: bool = False, **kw: Any
    ) -> int:
        """The user sends a voice note (or an audio file); return the update id."""
        file_id, unique = self.add_file(data, f"voice/file_{len(self.files)}.oga")
        media: dict[str, Any] = {
            "file_id": file_id,
            "file_unique_id": unique,
            "duration": duration,
            "mime_type": "audio/ogg" if not audio else "audio/mpeg",
            "file_size": len(data),
        }
        kw["audio" if audio else "voice"] = media
        return await self.push({"message": self.message(chat_id, **kw)})

    async def send_photo(
        self,
        chat_id: int,
        data: bytes,
        *,
        caption: str | None = None,
        document: bool = False,
        **kw: Any,
    ) -> int:
        """The user sends a photo (two sizes, as Telegram lists them) or an image file."""
        file_id, unique = self.add_file(data, f"photos/file_{len(self.files)}.jpg")
        if document:
            kw["document"] = {
                "file_id": file_id,
                "file_unique_id": unique,
                "file_name": "scan.png",
                "mime_type": "image/png",
                "file_size": len(data),
            }
        else:
            thumb_id, thumb_unique = self.add_file(
                data[:100], f"photos/thumb_{len(self.files)}.jpg"
            )
            kw["photo"] = [
                {
                    "file_id": thumb_id,
                    "file_unique_id": thumb_unique,
                    "width": 90,
                    "height": 60,
                    "file_size": min(100, len(data)),
                },
                {
                    "file_id": file_id,
                    "file_unique_id": unique,
                    "width": 1280,
                    "height": 960,
                    "file_size": len(data),
                },
            ]
        if caption is not None:
            kw["caption"] = caption
        return await self.push({"message": self.message(chat_id, **kw)})

    async def send_document(
        self, chat_id: int, data: bytes, name: str, mime_type: str, **kw: Any
    ) -> int:
        """The user sends a file (a PDF, ...) as a document."""
        file_id, unique = self.add_file(data, f"documents/file_{len(self.files)}")
        kw["document"] = {
            "file_id": file_id,
            "file_unique_id": unique,
            "file_name": name,
            "mime_type": mime_type,
            "file_size": len(data),
        }
        return await self.push({"message": self.message(chat_id, **kw)})

    async def press(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        *,
        user_id: int | None = None,
        inaccessible: bool = False,
    ) -> str:
        """The user presses a button on a bot message; return the callback query id."""
        cb_id = f"cb{next(self._cb_ids)}"
        query: dict[str, Any] = {
            "id": cb_id,
            "from": self.user(user_id or chat_id),
            "chat_instance": f"ci{chat_id}",
            "data": data,
        }
        if inaccessible:
            query["message"] = {"chat": self.chat(chat_id), "message_id": message_id, "date": 0}
        else:
            query["message"] = self._bot_message_dict(self.find(chat_id, message_id))
        await self.push({"callback_query": query})
        return cb_id

    async def push(self, update: dict[str, Any]) -> int:
        """Make an update available: queued for getUpdates, or POSTed to the webhook."""
        update_id = next(self._update_ids)
        update = {"update_id": update_id, **update}
        self._history[update_id] = update
        self.pushed_at[update_id] = time.perf_counter()
        if self.webhook_url is not None:
            await self.post_webhook(update, self.webhook_secret)
        else:
            self._pending.append(update)
            await self._notify()
        return update_id

    async def redeliver(self, update_id: int) -> None:
        """Deliver an already seen update again, as Telegram does after a crash or timeout."""
        update = self._history[update_id]
        self.pushed_at[update_id] = time.perf_counter()
        if self.webhook_url is not None:
            await self.post_webhook(update, self.webhook_secret)
        else:
            self._redeliver.append(update)
            await self._notify()

    async def post_webhook(self, update: dict[str, Any], secret: str | None) -> int:
        """POST one update to the registered webhook; return the HTTP status."""
        assert self.webhook_url is not None, "no webhook is set"
        if self._client is None:
            self._client = aiohttp.ClientSession()
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
        async with self._client.post(self.webhook_url, json=update, headers=headers) as resp:
            return resp.status

    # --- assertions --------------------------------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        """Every recorded call of ``method``."""
        return [c for c in self.calls if c.method == method]

    def texts(self, chat_id: int) -> list[str]:
        """Visible texts of the bot's messages in a chat, oldest first."""
        return [m.text for m in self.sent.get(chat_id, [])]

    def find(self, chat_id: int, message_id: int) -> BotMessage:
        """One bot message."""
        for m in self.sent.get(chat_id, []):
            if m.message_id == message_id:
                return m
        raise KeyError(f"no bot message {message_id} in chat {chat_id}")

    async def wait_for(self, predicate: Callable[[], bool], within: float = 30.0) -> None:
        """Wait until ``predicate()`` holds (checked after every API call)."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_texts(self, chat_id: int, count: int, within: float = 30.0) -> list[str]:
        """Wait until the bot has sent ``count`` messages to the chat, the last of them no
        longer a streamed draft (a draft ends with " …" until its final edit); their texts."""
        await self.wait_for(
            lambda: (
                len(self.sent.get(chat_id, [])) >= count
                and not self.texts(chat_id)[-1].endswith(" …")
            ),
            within,
        )
        return self.texts(chat_id)

    # --- HTTP --------------------------------------------------------------------------------
    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            raw: dict[str, Any] = await request.json()
        else:
            raw = dict(await request.post()) if request.can_read_body else {}
            raw.update(request.query)
        out: dict[str, Any] = {}
        for key, value in raw.items():
            is_json = key in _JSON_PARAMS and isinstance(value, str)
            out[key] = json.loads(value) if is_json else value
        return out

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(ApiError(401, "Unauthorized"))
        method = request.match_info["method"]
        params = await self._params(request)
        self.calls.append(Call(method, params, time.perf_counter()))
        try:
            await self._stalled(method)
            self._scripted_fault(method, params)
            handler = getattr(self, f"_m_{_snake(method)}", None)
            result = await handler(params) if handler else _not_found()
        except ApiError as exc:
            await self._notify()
            return _error(exc)
        await self._notify()
        return web.json_response({"ok": True, "result": result})

    async def _stalled(self, method: str) -> None:
        """Hang a stalled method's call until released, then fail it (nothing is sent)."""
        stalled = self._stalls.get(method)
        if stalled is None:
            return
        await self._notify()  # the call is visible in ``calls`` while it hangs
        await stalled.wait()
        raise ApiError(502, "Bad Gateway: stalled and released")

    def _scripted_fault(self, method: str, params: dict[str, Any]) -> None:
        chat = params.get("chat_id")
        sends = {"sendMessage", "editMessageText", "sendChatAction"}
        if method in sends and chat is not None and int(chat) in self.blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        for fault in self.faults:
            if fault.method != method or fault.times <= 0:
                continue
            if fault.chat_id is not None and (chat is None or int(chat) != fault.chat_id):
                continue
            fault.times -= 1
            raise ApiError(fault.status, fault.description, fault.retry_after)

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        for path, data in self.files.values():
            if path == request.match_info["path"]:
                return web.Response(body=data, content_type="application/octet-stream")
        return web.Response(status=404)

    # --- methods -----------------------------------------------------------------------------
    async def _m_get_me(self, _p: dict[str, Any]) -> dict[str, Any]:
        return self.bot_user()

    async def _m_get_updates(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url is not None:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = int(p.get("offset") or 0)
        timeout = float(p.get("timeout") or 0)
        limit = int(p.get("limit") or 100)
        if offset:
            # Telegram forgets every update below the offset: they are confirmed.
            self._pending = [u for u in self._pending if u["update_id"] >= offset]

        def ready() -> bool:
            return self._closing or bool(self._redeliver) or bool(self._pending)

        if not ready() and timeout > 0:
            try:
                async with asyncio.timeout(timeout), self._changed:
                    await self._changed.wait_for(ready)
            except TimeoutError:
                pass
        out = (self._redeliver + self._pending)[:limit]
        self._redeliver = []
        return out

    async def _m_delete_webhook(self, p: dict[str, Any]) -> bool:
        self.webhook_url = self.webhook_secret = None
        if str(p.get("drop_pending_updates", "")).lower() == "true":
            self._pending = []
        return True

    async def _m_set_webhook(self, p: dict[str, Any]) -> bool:
        self.webhook_url = str(p["url"])
        self.webhook_secret = p.get("secret_token")
        return True

    async def _m_get_webhook_info(self, _p: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.webhook_url or "", "has_custom_certificate": False,
                "pending_update_count": len(self._pending)}  # fmt: skip

    async def _m_set_my_commands(self, p: dict[str, Any]) -> bool:
        for c in p["commands"]:
            name, desc = c["command"], c["description"]
            if not (1 <= len(name) <= 32 and name.replace("_", "").isalnum() and name.islower()):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(desc) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands = list(p["commands"])
        return True

    async def _m_send_chat_action(self, _p: dict[str, Any]) -> bool:
        return True

    async def _m_answer_callback_query(self, _p: dict[str, Any]) -> bool:
        return True

    def _visible(self, p: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = str(p.get("text", ""))
        mode = str(p.get("parse_mode") or "")
        if mode.upper() == "HTML":
            try:
                text, entities = parse_html(text)
            except ParseError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from exc
        elif mode:
            raise ApiError(400, f"Bad Request: unsupported parse_mode {mode} in this fake")
        else:
            entities = list(p.get("entities") or [])
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        return text, entities

    async def _m_send_message(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(p["chat_id"])
        text, entities = self._visible(p)
        reply = p.get("reply_parameters") or {}
        msg = BotMessage(
            chat_id=chat_id,
            message_id=self.next_message_id(chat_id),
            text=text,
            source=str(p["text"]),
            parse_mode=p.get("parse_mode"),
            entities=entities,
            reply_markup=p.get("reply_markup"),
            reply_to=reply.get("message_id"),
            topic=int(p["message_thread_id"]) if p.get("message_thread_id") else None,
        )
        self.sent.setdefault(chat_id, []).append(msg)
        return self._bot_message_dict(msg)

    async def _m_send_voice(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(p["chat_id"])
        upload = p.get("voice")
        if not isinstance(upload, web.FileField):
            raise ApiError(400, "Bad Request: this fake only takes uploaded voice files")
        data = upload.file.read()
        # Telegram plays a voice note only for OGG with Opus audio.
        if not data.startswith(b"OggS") or b"OpusHead" not in data[:200]:
            raise ApiError(400, "Bad Request: VOICE_MESSAGES_FORBIDDEN or not OGG/Opus")
        voice = SentVoice(chat_id, self.next_message_id(chat_id), data)
        self.voices.setdefault(chat_id, []).append(voice)
        return {
            "message_id": voice.message_id,
            "date": int(time.time()),
            "chat": self.chat(chat_id),
            "from": self.bot_user(),
            "voice": {
                "file_id": f"voice-{chat_id}-{voice.message_id}",
                "file_unique_id": f"uvoice-{chat_id}-{voice.message_id}",
                "duration": 1,
                "mime_type": "audio/ogg",
                "file_size": len(data),
            },
        }

    async def _m_send_photo(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(p["chat_id"])
        upload = p.get("photo")
        if not isinstance(upload, web.FileField):
            raise ApiError(400, "Bad Request: this fake only takes uploaded photo files")
        data = upload.file.read()
        if not data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")):
            raise ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED")
        caption = str(p.get("caption") or "")
        if len(caption) > 1024:
            raise ApiError(400, "Bad Request: message caption is too long")
        photo = SentPhoto(
            chat_id,
            self.next_message_id(chat_id),
            data,
            caption,
            upload.filename,
            upload.content_type,
        )
        self.photos.setdefault(chat_id, []).append(photo)
        out: dict[str, Any] = {
            "message_id": photo.message_id,
            "date": int(time.time()),
            "chat": self.chat(chat_id),
            "from": self.bot_user(),
            "photo": [
                {
                    "file_id": f"photo-{chat_id}-{photo.message_id}",
                    "file_unique_id": f"uphoto-{chat_id}-{photo.message_id}",
                    "width": 1200,
                    "height": 750,
                    "file_size": len(data),
                }
            ],
        }
        if caption:
            out["caption"] = caption
        return out

    async def _m_create_forum_topic(self, p: dict[str, Any]) -> dict[str, Any]:
        """A new topic in a chat that has topics (see ``enable_topics``); 400 elsewhere."""
        chat_id = int(p["chat_id"])
        if chat_id not in self.topic_chats:
            raise ApiError(400, "Bad Request: the chat is not a forum")
        name = str(p["name"])
        if not 1 <= len(name) <= 128:
            raise ApiError(400, "Bad Request: TOPIC_TITLE_EMPTY")
        thread_id = self.next_message_id(chat_id)  # a topic's id is its first message's id
        self.topics.setdefault(chat_id, {})[thread_id] = name
        return {"message_thread_id": thread_id, "name": name, "icon_color": 7322096}

    async def _m_edit_message_text(self, p: dict[str, Any]) -> dict[str, Any]:
        msg = self._editable(p)
        text, entities = self._visible(p)
        markup = p.get("reply_markup")
        if text == msg.text and entities == msg.entities and markup == msg.reply_markup:
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        msg.edits.append(msg.text)
        msg.text, msg.source, msg.entities = text, str(p["text"]), entities
        msg.parse_mode, msg.reply_markup = p.get("parse_mode"), markup
        return self._bot_message_dict(msg)

    async def _m_edit_message_reply_markup(self, p: dict[str, Any]) -> dict[str, Any]:
        msg = self._editable(p)
        msg.reply_markup = p.get("reply_markup")
        return self._bot_message_dict(msg)

    async def _m_get_file(self, p: dict[str, Any]) -> dict[str, Any]:
        file_id = str(p["file_id"])
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        if len(data) > MAX_DOWNLOAD:
            raise ApiError(400, "Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"uniq-{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    def _editable(self, p: dict[str, Any]) -> BotMessage:
        try:
            return self.find(int(p["chat_id"]), int(p["message_id"]))
        except KeyError:
            raise ApiError(400, "Bad Request: message to edit not found") from None

    def _bot_message_dict(self, msg: BotMessage) -> dict[str, Any]:
        out: dict[str, Any] = {
            "message_id": msg.message_id,
            "date": int(time.time()),
            "chat": self.chat(msg.chat_id),
            "from": self.bot_user(),
            "text": msg.text,
        }
        if msg.entities:
            out["entities"] = msg.entities
        if msg.reply_markup:
            out["reply_markup"] = msg.reply_markup
        if msg.topic is not None:  # a message sent into a topic says so, as Telegram's do
            out["message_thread_id"] = msg.topic
            out["is_topic_message"] = True
        return out


def _auto_entities(text: str) -> list[dict[str, Any]]:
    """The mention and bot_command entities Telegram adds to a user's text on its own."""
    found: list[dict[str, Any]] = []
    for kind, pattern in (
        ("bot_command", r"(?<!\S)/\w{1,32}(?:@\w{5,32})?"),
        ("mention", r"(?<![\w/])@\w{5,32}"),
    ):
        found.extend(
            {"type": kind, "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
            for m in re.finditer(pattern, text)
        )
    return sorted(found, key=lambda e: int(e["offset"]))


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _not_found() -> Any:
    raise ApiError(404, "Not Found: method not found")


def _error(exc: ApiError) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": exc.status, "description": exc.description}
    if exc.retry_after is not None:
        body["parameters"] = {"retry_after": exc.retry_after}
    return web.json_response(body, status=exc.status)
