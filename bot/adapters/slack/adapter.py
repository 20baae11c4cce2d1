"""Slack channel on slack-bolt (async): DMs, mentions in threads, buttons, exactly once.

Acknowledge first: Bolt runs our listeners before it answers Slack
(``process_before_response``), and each listener only turns the payload into an
``InboundMessage`` and hands it to a tracked background task, so the ack never waits for the
agent. Exactly once: the message id is the Slack message ``ts`` (see ``slack_events``), and
dispatch drops a repeated dedupe key, persisted, so Slack's retries (``X-Slack-Retry-Num``)
and Socket Mode redeliveries never produce a second reply, across restarts too. Scheduled
pushes are exactly once as well: each carries its outbox key as message metadata, and after a
crash the outbox asks ``find_sent`` whether Slack already has it (see ``slack_keyed``).

Socket Mode by default (no public URL); HTTP mode serves the Events API on an aiohttp server
where Bolt verifies every request's signature (401 otherwise, nothing processed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.base import UNSUPPORTED, MessageHandler, SenderCheck
from bot.adapters.draft import DraftStream
from bot.adapters.slack.api import SlackCalls
from bot.adapters.slack.audio import AudioFetcher, remove_files
from bot.adapters.slack.config import SlackOptions
from bot.adapters.slack.events import (
    BotIdentity,
    Incoming,
    from_button,
    from_message_event,
    is_dm,
)
from bot.adapters.slack.format import chosen_blocks, escape, render
from bot.adapters.slack.keyed import LOOKBACK, find_push, push_metadata
from bot.adapters.slack.stream import SlackDraft
from bot.adapters.slack.transport import build_bolt, close_socket, connect_socket, serve_http
from bot.clock import Clock
from bot.errors import ChannelError, TransientChannelError, Unreachable
from bot.messages import Address, InboundMessage, OutboundMessage, Receipt
from bot.speech.fair import FairTranscriber

log = logging.getLogger(__name__)

PRIVATE_KINDS = {"briefing", "reminder", "proposal"}
"""Scheduled pushes carry personal data: they only ever go to a DM."""


class SlackAdapter:
    """The Slack ``ChannelAdapter``, ``StreamingAdapter`` and the outbox's ``KeyedChannel``."""

    name = "slack"

    def __init__(
        self,
        *,
        bot_token: str,
        clock: Clock,
        mode: str = "socket",
        app_token: str | None = None,
        signing_secret: str | None = None,
        api_url: str = "https://slack.com/api/",
        http_host: str = "127.0.0.1",
        http_port: int = 3000,
        http_path: str = "/slack/events",
        transcriber: FairTranscriber | None = None,
        is_known: SenderCheck | None = None,
        spool_dir: Path = Path("data/slack-audio"),
        max_audio_bytes: int = 25_000_000,
        max_image_bytes: int = 10_000_000,
        stream_interval: float = 1.5,
        drain_seconds: float = 10.0,
        retries: int = 3,
        lookback: int = LOOKBACK,
    ) -> None:
        if mode not in ("socket", "http"):
            raise ValueError(f"unknown Slack mode {mode!r}")
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.mode = mode
        self.clock = clock
        self.api_url = api_url
        self.http_host, self.http_port, self.http_path = http_host, http_port, http_path
        self.transcriber = transcriber
        self.is_known = is_known
        """Asked before an audio file is fetched: strangers get no download, no model time."""
        self.spool_dir = spool_dir
        self.max_audio_bytes = max_audio_bytes
        self.max_image_bytes = max_image_bytes
        """The largest picture fetched (bigger ones become a note in the message)."""
        self.stream_interval = stream_interval
        self.drain_seconds = drain_seconds
        self.calls = SlackCalls(attempts=retries)
        self.lookback = lookback
        """How many of a chat's newest messages ``find_sent`` searches."""
        self.bot: BotIdentity | None = None
        self._on_message: MessageHandler | None = None
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._audio: AudioFetcher | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._names: dict[str, str | None] = {}
        self.http_url: str | None = None
        """The Events API URL being served in HTTP mode (after ``start``)."""

    @classmethod
    def from_options(
        cls,
        options: SlackOptions,
        clock: Clock,
        transcriber: FairTranscriber | None = None,
        is_known: SenderCheck | None = None,
    ) -> SlackAdapter:
        """Build the adapter from its options (``SLACK_*`` / ``LIFEBOT_SLACK_*``)."""
        return cls(
            bot_token=options.bot_token,
            app_token=options.app_token,
            signing_secret=options.signing_secret,
            mode=options.mode,
            clock=clock,
            api_url=options.api_url,
            http_host=options.http_host,
            http_port=options.http_port,
            http_path=options.http_path,
            transcriber=transcriber,
            is_known=is_known,
            spool_dir=options.spool_dir,
            max_audio_bytes=options.max_audio_bytes,
            max_image_bytes=options.max_image_bytes,
            stream_interval=options.stream_interval,
            drain_seconds=options.drain_seconds,
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self, on_message: MessageHandler) -> None:
        """Check the token, then receive events over Socket Mode or HTTP."""
        self._on_message = on_message
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        assert self._session is not None
        self._client = AsyncWebClient(
            token=self.bot_token, base_url=self.api_url, session=self._session, timeout=30
        )
        client = self._client
        auth = await self.calls.call("auth.test", client.auth_test)
        self.bot = BotIdentity(str(auth["team_id"]), str(auth["user_id"]), auth.get("bot_id"))
        self._audio = AudioFetcher(
            session=self._session,
            token=self.bot_token,
            api_url=self.api_url,
            transcriber=self.transcriber,
            spool_dir=self.spool_dir,
            max_bytes=self.max_audio_bytes,
        )
        bolt = build_bolt(
            # A token-less template sharing our session (Bolt makes a client per request).
            client=AsyncWebClient(base_url=self.api_url, session=self._session, timeout=30),
            auth=AuthorizeResult.from_auth_test_response(
                auth_test_response=auth, bot_token=self.bot_token
            ),
            signing_secret=self.signing_secret,
            verify_requests=self.mode == "http",
            on_event=self._on_message_event,
            on_button=self._on_button,
        )
        if self.mode == "http":
            self._runner, self.http_url = await serve_http(
                bolt, self.http_host, self.http_port, self.http_path
            )
        else:
            if not self.app_token:
                raise ChannelError("SLACK_APP_TOKEN is needed for Socket Mode")
            self._socket = await connect_socket(bolt, self.app_token, self.calls)
        log.info(
            "slack: connected to team %s as %s (%s mode)",
            self.bot.team_id,
            self.bot.bot_user_id,
            self.mode,
        )

    async def stop(self) -> None:
        """Stop receiving, let answers under way finish (up to the drain time), close."""
        if self._socket is not None:
            socket, self._socket = self._socket, None
            await close_socket(socket)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        await self.wait_idle(self.drain_seconds)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def wait_idle(self, within: float | None = None) -> bool:
        """Wait until every event received so far is handled; False if ``within`` s ran out."""
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        while self._tasks:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=left)
        return True

    # --- inbound -----------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_message_event(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        # Runs before Bolt answers Slack (events are acked by Bolt): translate and hand off.
        assert self.bot is not None
        incoming = from_message_event(body, event, self.bot, self.clock.now())
        if incoming is not None:
            self._spawn(self._handle(incoming), f"slack-event-{incoming.msg.message_id}")

    def _on_button(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        assert self.bot is not None
        msg = from_button(body, action, self.bot, self.clock.now())
        if msg is not None:
            self._spawn(self._handle_click(body, msg), f"slack-{msg.message_id}")

    async def _handle(self, incoming: Incoming) -> None:
        msg, paths = incoming.msg, []
        try:
            files = incoming.audio or incoming.images
            if incoming.unreadable:
                if await self._known(msg):
                    # A fixed answer in the DM: nothing for the model, nothing fetched.
                    await self._post(channel=msg.address.chat_id, text=UNSUPPORTED)
                    return
                msg.text = "(file)"  # a stranger: the pairing answer, as for any message
            elif files and not await self._known(msg):
                # A stranger: the pairing reply needs no transcript, so nothing is fetched.
                msg.text = msg.text or ("(audio file)" if incoming.audio else "(photo)")
            elif files and self._audio is not None:
                if incoming.audio:
                    key = f"slack:{msg.sender_id}"
                    done = await self._audio.transcribe(incoming.audio, key=key)
                    paths = done.paths
                    msg.text = "\n\n".join([t for t in (msg.text, *done.texts) if t])
                    msg.attachments.extend(done.attachments)
                if incoming.images:
                    pics = await self._audio.pictures(
                        incoming.images, max_bytes=self.max_image_bytes
                    )
                    msg.text = "\n\n".join([t for t in (msg.text, *pics.notes) if t])
                    msg.attachments.extend(pics.attachments)
            msg.sender_name = await self._name_of(msg.sender_id)
            assert self._on_message is not None
            await self._on_message(msg)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("slack: failed to handle message %s", msg.message_id)
        finally:
            if paths:
                await asyncio.to_thread(remove_files, paths)

    async def _known(self, msg: InboundMessage) -> bool:
        if self.is_known is None:
            return True
        return await self.is_known(self.name, msg.address.account, msg.sender_id)

    async def _handle_click(self, body: dict[str, Any], msg: InboundMessage) -> None:
        await self._mark_chosen(body, msg)
        await self._handle(Incoming(msg, []))

    async def _mark_chosen(self, body: dict[str, Any], msg: InboundMessage) -> None:
        """Replace the clicked buttons with a note of the choice, so nobody clicks twice."""
        message = body.get("message") or {}
        if not message.get("ts") or (body.get("container") or {}).get("is_ephemeral"):
            return
        label = str(msg.raw.get("label") or msg.text)
        blocks = chosen_blocks(message.get("blocks") or [], f"✓ {escape(label)}")
        try:
            await self.calls.once(
                "chat.update",
                lambda: self._api().chat_update(
                    channel=msg.address.chat_id,
                    ts=message["ts"],
                    text=message.get("text") or "",
                    blocks=blocks,
                ),
            )
        except ChannelError as exc:
            log.warning("slack: could not mark the chosen button: %s", exc)

    async def _name_of(self, user_id: str) -> str | None:
        """The person's display name (cached; None when users.info is not allowed)."""
        if user_id not in self._names:
            try:
                resp = await self.calls.once(
                    "users.info", lambda: self._api().users_info(user=user_id)
                )
                user = resp["user"]
                profile = user.get("profile") or {}
                self._names[user_id] = (
                    profile.get("real_name") or user.get("real_name") or user.get("name")
                )
            except TransientChannelError as exc:
                log.info("slack: no name for a user yet: %s", exc)
                return None
            except ChannelError as exc:
                log.info("slack: no name for a user: %s", exc)
                self._names[user_id] = None  # e.g. users:read not granted: do not ask again
        return self._names[user_id]

    # --- outbound ----------------------------------------------------------------------------

    def _api(self) -> AsyncWebClient:
        if self._client is None:
            raise ChannelError("the Slack adapter is not started")
        return self._client

    async def _post(self, **kwargs: Any) -> Any:
        return await self._api().chat_postMessage(unfurl_media=False, **kwargs)

    async def _update(self, **kwargs: Any) -> Any:
        return await self._api().chat_update(**kwargs)

    def _check_private(self, msg: OutboundMessage) -> None:
        if msg.kind in PRIVATE_KINDS and not is_dm(msg.address.chat_id):
            raise Unreachable(
                f"a {msg.kind} is personal and goes to a DM only, but the last chat of this "
                f"person is channel {msg.address.chat_id}; they can DM the app to fix it"
            )

    async def send(self, msg: OutboundMessage) -> Receipt:
        """Post a message (split when long, buttons on the last part); receipt = first ts."""
        return await self._send(msg, None)

    async def send_keyed(self, msg: OutboundMessage, key: str) -> Receipt:
        """Post a push tagged with the outbox key (message metadata), so it can be found again."""
        return await self._send(msg, key)

    async def find_sent(self, address: Address, key: str) -> Receipt | None:
        """The receipt of the push ``key`` if our bot posted it among the chat's newest messages.

        Raises ChannelError when Slack cannot be asked (the outbox then asks again later).
        """
        if self.bot is None:
            raise ChannelError("the Slack adapter is not started")
        ts = await find_push(
            self.calls,
            self._api().conversations_history,
            self.bot,
            address.chat_id,
            key,
            lookback=self.lookback,
        )
        return None if ts is None else Receipt("slack", ts, address.chat_id)

    async def _send(self, msg: OutboundMessage, key: str | None) -> Receipt:
        self._check_private(msg)
        thread = {"thread_ts": msg.address.thread_id} if msg.address.thread_id else {}
        if msg.image is not None:
            # The picture first (files upload v2: URL, bytes, complete), then the words.
            upload = functools.partial(
                self._api().files_upload_v2,
                channel=msg.address.chat_id,
                file=msg.image.data,
                filename=msg.image.name,
                title=msg.image.alt,
                alt_txt=msg.image.alt,
                thread_ts=msg.address.thread_id,
            )
            await self.calls.call("files.uploadV2", upload)
        first: Receipt | None = None
        parts = render(msg)
        for i, part in enumerate(parts):
            kwargs: dict[str, Any] = {"channel": msg.address.chat_id, "text": part.text, **thread}
            if part.blocks is not None:
                kwargs["blocks"] = part.blocks
            if key is not None:
                kwargs["metadata"] = push_metadata(key, i, len(parts))
            resp = await self.calls.call(
                "chat.postMessage", functools.partial(self._post, **kwargs)
            )
            if first is None:
                first = Receipt("slack", str(resp["ts"]), str(resp["channel"]))
        assert first is not None
        return first

    def open_stream(self, address: Address, reply_to: str | None) -> DraftStream:
        """Render an answer as it streams: one message, updated at most every interval."""
        surface = SlackDraft(
            address=address,
            calls=self.calls,
            post=lambda **kw: self._post(channel=address.chat_id, **kw),
            update=self._update,
            send=self.send,
        )
        return DraftStream(surface, interval=self.stream_interval, first_draft_waits=False)
