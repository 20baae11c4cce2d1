"""A loopback fake of Slack: the Web API, the Socket Mode WebSocket endpoint and file downloads.

Real ``slack_sdk`` / ``slack_bolt`` code runs against it. It plays both of Slack's roles:

* the server our adapter calls (``auth.test``, ``chat.postMessage``, ``chat.update``,
  ``users.info``, ``conversations.history``, ``apps.connections.open`` and private file
  downloads), with scriptable failures (429 with Retry-After, ``invalid_auth``,
  ``token_revoked``, ``not_in_channel``) and answers held back (``hold``: Slack did the work,
  then our process dies before the answer arrives);
* the client that delivers events to our adapter: signed HTTP requests to its Events API
  endpoint (``post_event``), or envelopes over the Socket Mode WebSocket (``deliver``), whose
  acknowledgements it records with timings.

Builders for Slack's wire payloads (``dm_event``, ``mention_event``, ``block_actions``) live here
too, because they are Slack's format, not ours.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

TEAM_ID = "T0LIFEBOT"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-1-test-app-token"
SIGNING_SECRET = "test-signing-secret"

METHOD_SCOPES = {
    "auth.test": None,
    "apps.connections.open": "connections:write",
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "users.info": "users:read",
    "files": "files:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
}
"""The scope Slack requires for each method (``files`` = private file downloads)."""
HISTORY_SCOPES = {"D": "im:history", "C": "channels:history", "G": "groups:history"}
"""``conversations.history`` needs the scope of the conversation's type (by id prefix)."""
EVENT_SCOPES = {"message.im": "im:history", "app_mention": "app_mentions:read"}
"""The scope and subscription Slack requires before it sends an event."""


@dataclass
class Failure:
    """One scripted failure of a Web API method."""

    error: str = "ratelimited"
    status: int = 200
    retry_after: int | None = None


@dataclass
class Call:
    """One Web API request as the fake received it."""

    method: str
    args: dict[str, Any]
    at: float
    """``time.monotonic()`` when it arrived."""
    token: str | None
    result: str
    """``ok`` or the error the fake answered with."""


@dataclass
class Ack:
    """A Socket Mode acknowledgement received for an envelope."""

    envelope_id: str
    payload: dict[str, Any] | None
    sent_at: float
    acked_at: float

    @property
    def seconds(self) -> float:
        """Time from delivering the envelope to receiving its ack."""
        return self.acked_at - self.sent_at


@dataclass
class FakeSlack:
    """The fake server. Start it, point ``LIFEBOT_SLACK_API_URL`` at ``api_url``."""

    team_id: str = TEAM_ID
    bot_user_id: str = BOT_USER_ID
    bot_id: str = BOT_ID
    bot_token: str = BOT_TOKEN
    app_token: str = APP_TOKEN
    users: dict[str, str] = field(default_factory=dict)
    """User id -> real name, answered by ``users.info``."""
    calls: list[Call] = field(default_factory=list)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(channel, ts) -> the message as it is now (after updates)."""
    posted: list[dict[str, Any]] = field(default_factory=list)
    """Every accepted chat.postMessage, in order (with its ``ts``)."""
    updates: list[dict[str, Any]] = field(default_factory=list)
    """Every accepted chat.update, in order."""
    acks: dict[str, Ack] = field(default_factory=dict)
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    """File id -> (content, mime type), served to the bot token only."""
    file_downloads: list[tuple[str, str | None]] = field(default_factory=list)
    """(file id, Authorization header) for every download attempt."""
    pending_uploads: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Upload v2 files between getUploadURLExternal and completeUploadExternal."""
    uploads: list[dict[str, Any]] = field(default_factory=list)
    """Every file shared by completeUploadExternal (with its bytes), in order."""
    revoked: bool = False
    """When set, every bot-token call answers ``token_revoked``."""
    scopes: set[str] | None = None
    """Scopes granted to the app (None: all); other methods answer ``missing_scope``."""
    events: set[str] | None = None
    """Event subscriptions (None: all); ``deliver``/``post_event`` refuse others."""
    api_url: str = ""
    base_url: str = ""

    def __post_init__(self) -> None:
        self._failures: dict[str, list[Failure]] = {}
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self._sent: dict[str, float] = {}
        self._ack_events: dict[str, asyncio.Event] = {}
        self.connected = asyncio.Event()
        self.connections = 0
        self._connects = asyncio.Condition()
        self._session: aiohttp.ClientSession | None = None
        self._holds: dict[str, int] = {}
        self._released = asyncio.Event()
        self.held = asyncio.Event()
        """Set when an answer is being held back (the work was done)."""

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> str:
        """Listen on a free loopback port; return the Web API base URL (ends with /api/)."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/socket", self._socket)
        app.router.add_get("/files/{file_id}/{name}", self._file)
        app.router.add_post("/upload/{file_id}", self._upload)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"
        self.api_url = f"{self.base_url}/api/"
        self._session = aiohttp.ClientSession()
        return self.api_url

    async def stop(self) -> None:
        """Close sockets and the server."""
        self.release()
        for ws in list(self._sockets):
            await ws.close()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- scripting -------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        error: str = "ratelimited",
        *,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail (429 needs ``status=429``)."""
        self._failures.setdefault(method, []).extend(
            Failure(error, status, retry_after) for _ in range(times)
        )

    def hold(self, method: str, times: int = 1) -> None:
        """Do the next ``times`` calls of ``method``, but hold their answers until ``release``."""
        self._holds[method] = self._holds.get(method, 0) + times
        self._released.clear()

    def release(self) -> None:
        """Send the held answers (to whoever is still waiting for them)."""
        self._released.set()

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0ANA",
        bot_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Put a message someone else wrote into ``channel``'s history; its ts."""
        ts = self._next_ts()
        msg: dict[str, Any] = {"type": "message", "channel": channel, "ts": ts, "text": text}
        msg["user"] = user
        if bot_id is not None:
            msg["bot_id"] = bot_id
        if metadata is not None:
            msg["metadata"] = metadata
        self.messages[(channel, ts)] = msg
        return ts

    def add_file(
        self, data: bytes, name: str, mimetype: str, *, subtype: str | None = None
    ) -> dict[str, Any]:
        """Host a private file; return its Slack file object for a ``files`` list."""
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.files[file_id] = (data, mimetype)
        url = f"{self.base_url}/files/{file_id}/{name}"
        obj: dict[str, Any] = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1],
            "size": len(data),
            "url_private": url,
            "url_private_download": url + "?download=1",
        }
        if subtype is not None:
            obj["subtype"] = subtype
        return obj

    def calls_of(self, method: str, *, ok_only: bool = False) -> list[Call]:
        """Calls of one Web API method, in order."""
        return [c for c in self.calls if c.method == method and (c.result == "ok" or not ok_only)]

    def texts(self, channel: str | None = None) -> list[str]:
        """Current text of every message the bot posted (after updates), in posting order."""
        return [
            self.messages[(p["channel"], p["ts"])]["text"]
            for p in self.posted
            if channel is None or p["channel"] == channel
        ]

    # --- the Web API -----------------------------------------------------------------------

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(dict(await request.post()))
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else args.get("token")
        resp = self._answer(method, args, token)
        assert resp.text is not None
        error = json.loads(resp.text).get("error", "ok")
        self.calls.append(Call(method, args, time.monotonic(), token, str(error)))
        if self._holds.get(method):
            self._holds[method] -= 1
            self.held.set()
            await self._released.wait()
        return resp

    def _answer(self, method: str, args: dict[str, Any], token: str | None) -> web.Response:
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            return _error("not_authed" if not token else "invalid_auth")
        if self.revoked and method != "apps.connections.open":
            return _error("token_revoked")
        if not self._granted(method) or not self._history_granted(method, args):
            return _error("missing_scope")
        queue = self._failures.get(method)
        if queue:
            f = queue.pop(0)
            headers = {"Retry-After": str(f.retry_after)} if f.retry_after is not None else {}
            return _error(f.error, status=f.status, headers=headers)
        handler = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "users.info": self._users_info,
            "conversations.history": self._history,
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": self._complete_upload,
        }.get(method)
        if handler is None:
            return _error("unknown_method")
        return handler(args)

    def _granted(self, method: str) -> bool:
        needed = METHOD_SCOPES.get(method)
        return self.scopes is None or needed is None or needed in self.scopes

    def _history_granted(self, method: str, args: dict[str, Any]) -> bool:
        if method != "conversations.history" or self.scopes is None:
            return True
        needed = HISTORY_SCOPES.get(str(args.get("channel", ""))[:1], "mpim:history")
        return needed in self.scopes

    def check_subscribed(self, body: dict[str, Any]) -> None:
        """Slack only sends events the app subscribed to and has the scope for."""
        event = body.get("event") if body.get("type") == "event_callback" else None
        if event is None:
            return
        name = "message.im" if event.get("type") == "message" else str(event.get("type"))
        if self.events is not None:
            assert name in self.events, f"the app is not subscribed to {name}"
        if self.scopes is not None and name in EVENT_SCOPES:
            assert EVENT_SCOPES[name] in self.scopes, f"{name} needs {EVENT_SCOPES[name]}"

    def _auth_test(self, _args: dict[str, Any]) -> web.Response:
        return _ok(
            url="https://lifebot-test.slack.com/",
            team="lifebot test",
            user="lifebot",
            team_id=self.team_id,
            user_id=self.bot_user_id,
            bot_id=self.bot_id,
            is_enterprise_install=False,
        )

    def _connections_open(self, _args: dict[str, Any]) -> web.Response:
        ws = self.base_url.replace("http://", "ws://")
        return _ok(url=f"{ws}/socket?ticket={uuid.uuid4().hex}")

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def _post_message(self, args: dict[str, Any]) -> web.Response:
        channel = str(args.get("channel", ""))
        if not channel:
            return _error("channel_not_found")
        ts = self._next_ts()
        msg = {
            "channel": channel,
            "ts": ts,
            "text": args.get("text", ""),
            "blocks": _json_arg(args.get("blocks")),
            "thread_ts": args.get("thread_ts"),
            "metadata": _json_arg(args.get("metadata")),
        }
        self.posted.append(msg)
        self.messages[(channel, ts)] = {
            **msg,
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
        }
        return _ok(channel=channel, ts=ts, message={"text": msg["text"], "ts": ts})

    def _upload_url(self, args: dict[str, Any]) -> web.Response:
        """Step 1 of the v2 upload: a one-off URL for the bytes of a named file."""
        try:
            length = int(args.get("length") or 0)
        except ValueError:
            length = 0
        if not args.get("filename") or length <= 0:
            return _error("invalid_arguments")
        file_id = f"FUP{next(self._ts)}"
        self.pending_uploads[file_id] = {"filename": args["filename"], "length": length}
        return _ok(upload_url=f"{self.base_url}/upload/{file_id}", file_id=file_id)

    async def _upload(self, request: web.Request) -> web.Response:
        """Step 2: the bytes, POSTed to the URL from step 1 (no token: the URL is the key)."""
        pending = self.pending_uploads.get(request.match_info["file_id"])
        if pending is None:
            return web.Response(status=404)
        data = await request.read()
        if len(data) != pending["length"]:
            return web.Response(status=400, text="length mismatch")
        pending["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    def _complete_upload(self, args: dict[str, Any]) -> web.Response:
        """Step 3: share the uploaded files in a channel (or thread)."""
        files = _json_arg(args.get("files")) or []
        out = []
        for f in files:
            pending = self.pending_uploads.pop(str(f.get("id")), None)
            if pending is None or "data" not in pending:
                return _error("file_not_found")
            self.uploads.append(
                {
                    "file_id": f["id"],
                    "title": f.get("title"),
                    "channel": args.get("channel_id"),
                    "thread_ts": args.get("thread_ts"),
                    "filename": pending["filename"],
                    "data": pending["data"],
                }
            )
            out.append({"id": f["id"], "title": f.get("title")})
        return _ok(files=out)

    def _history(self, args: dict[str, Any]) -> web.Response:
        """A conversation's top-level messages, newest first, in pages (cursor = offset)."""
        channel = str(args.get("channel", ""))
        if not channel:
            return _error("channel_not_found")
        try:
            limit = min(999, max(1, int(args.get("limit") or 100)))
            cursor = str(args.get("cursor") or "")
            offset = int(base64.b64decode(cursor).decode().removeprefix("next:")) if cursor else 0
        except ValueError:
            return _error("invalid_cursor" if args.get("cursor") else "invalid_arguments")
        with_metadata = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
        timeline = sorted(
            (
                m
                for (ch, ts), m in self.messages.items()
                # Thread replies are not part of the channel's timeline.
                if ch == channel and m.get("thread_ts") in (None, ts)
            ),
            key=lambda m: float(m["ts"]),
            reverse=True,
        )
        page = timeline[offset : offset + limit]
        out = []
        for m in page:
            shown = {k: v for k, v in m.items() if v is not None and k != "channel"}
            if not with_metadata:
                shown.pop("metadata", None)
            out.append(shown)
        more = offset + limit < len(timeline)
        next_cursor = base64.b64encode(f"next:{offset + limit}".encode()).decode() if more else ""
        return _ok(messages=out, has_more=more, response_metadata={"next_cursor": next_cursor})

    def _update(self, args: dict[str, Any]) -> web.Response:
        key = (str(args.get("channel")), str(args.get("ts")))
        if key not in self.messages:
            return _error("message_not_found")
        current = self.messages[key]
        current["text"] = args.get("text", current["text"])
        if "blocks" in args:
            current["blocks"] = _json_arg(args["blocks"])
        self.updates.append({"channel": key[0], "ts": key[1], **args})
        return _ok(channel=key[0], ts=key[1], text=current["text"])

    def _users_info(self, args: dict[str, Any]) -> web.Response:
        uid = str(args.get("user"))
        if uid not in self.users:
            return _error("user_not_found")
        name = self.users[uid]
        return _ok(
            user={
                "id": uid,
                "name": name.lower().replace(" ", "."),
                "real_name": name,
                "profile": {"real_name": name, "display_name": name.split()[0]},
            }
        )

    async def _file(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        auth = request.headers.get("Authorization")
        self.file_downloads.append((file_id, auth))
        if auth != f"Bearer {self.bot_token}" or self.revoked or not self._granted("files"):
            # Real Slack answers a sign-in page; a test only needs to see it is refused.
            return web.Response(status=403, text="<html>sign in</html>", content_type="text/html")
        if file_id not in self.files:
            return web.Response(status=404)
        data, mime = self.files[file_id]
        return web.Response(body=data, content_type=mime)

    # --- Socket Mode -----------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        async with self._connects:
            self.connections += 1
            self._connects.notify_all()
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                "connection_info": {"app_id": "A0LIFEBOT"},
            }
        )
        self.connected.set()
        try:
            async for frame in ws:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    self._on_ack(json.loads(frame.data))
        finally:
            self._sockets.remove(ws)
            if not self._sockets:
                self.connected.clear()
        return ws

    def _on_ack(self, data: dict[str, Any]) -> None:
        eid = data.get("envelope_id")
        if not isinstance(eid, str) or eid not in self._sent:
            return
        self.acks[eid] = Ack(eid, data.get("payload"), self._sent[eid], time.monotonic())
        self._ack_events.setdefault(eid, asyncio.Event()).set()

    async def deliver(
        self,
        payload: dict[str, Any],
        *,
        kind: str = "events_api",
        envelope_id: str | None = None,
        retry_attempt: int = 0,
        retry_reason: str = "",
    ) -> str:
        """Send an envelope over the newest Socket Mode connection; return its envelope id.

        Redeliver (what Slack does when an ack is late) by passing the same ``envelope_id``
        with ``retry_attempt`` > 0.
        """
        self.check_subscribed(payload)
        await asyncio.wait_for(self.connected.wait(), 10)
        eid = envelope_id or str(uuid.uuid4())
        envelope: dict[str, Any] = {
            "envelope_id": eid,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
        }
        if kind == "events_api":
            envelope["retry_attempt"] = retry_attempt
            envelope["retry_reason"] = retry_reason
        self._ack_events[eid] = asyncio.Event()
        self._sent[eid] = time.monotonic()
        await self._sockets[-1].send_str(json.dumps(envelope))
        return eid

    async def refresh(self) -> None:
        """Ask the client to reconnect, as Slack does every few hours (``refresh_requested``)."""
        await self._sockets[-1].send_json(
            {"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "fake"}}
        )

    async def wait_connections(self, count: int, within: float = 30.0) -> None:
        """Wait until the client has opened ``count`` Socket Mode connections in all."""
        async with asyncio.timeout(within), self._connects:
            await self._connects.wait_for(lambda: self.connections >= count)

    async def wait_ack(self, envelope_id: str, within: float = 30.0) -> Ack:
        """Wait until the envelope is acknowledged."""
        await asyncio.wait_for(self._ack_events[envelope_id].wait(), within)
        return self.acks[envelope_id]

    # --- Events API over HTTP ------------------------------------------------------------

    async def post_event(
        self,
        url: str,
        body: dict[str, Any],
        *,
        secret: str = SIGNING_SECRET,
        retry_num: int | None = None,
        timestamp: int | None = None,
        signature: str | None = None,
        interactive: bool = False,
    ) -> tuple[int, str, float]:
        """POST a signed request to an Events API / interactivity endpoint, as Slack does.

        Returns (status, body, seconds until the response arrived). Interactive payloads are
        form-encoded (``payload=<json>``), events are JSON.
        """
        assert self._session is not None
        self.check_subscribed(body)
        raw = (
            urlencode({"payload": json.dumps(body)}) if interactive else json.dumps(body)
        ).encode()
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {
            "Content-Type": "application/x-www-form-urlencoded"
            if interactive
            else "application/json",
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": signature or sign(secret, ts, raw),
        }
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        start = time.monotonic()
        async with self._session.post(url, data=raw, headers=headers) as resp:
            text = await resp.text()
            return resp.status, text, time.monotonic() - start


# --- payload builders ----------------------------------------------------------------------

_ts_counter = itertools.count(1)


def new_ts() -> str:
    """A fresh Slack message timestamp (unique within a test run)."""
    return f"{1_600_000_000 + next(_ts_counter)}.000200"


def event_body(event: dict[str, Any], *, team_id: str = TEAM_ID) -> dict[str, Any]:
    """Wrap an event in an ``event_callback`` envelope with a fresh event id."""
    return {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": "A0LIFEBOT",
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [
            {"enterprise_id": None, "team_id": team_id, "user_id": BOT_USER_ID, "is_bot": True}
        ],
    }


def dm_event(
    text: str,
    *,
    user: str = "U0ANA",
    channel: str = "D0ANA",
    ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``message.im`` event body (a DM to the app)."""
    event = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts or new_ts(),
        "channel_type": "im",
        "client_msg_id": str(uuid.uuid4()),
        **extra,
    }
    event["event_ts"] = event["ts"]
    return event_body(event)


def mention_event(
    text: str,
    *,
    user: str = "U0ANA",
    channel: str = "C0GENERAL",
    ts: str | None = None,
    thread_ts: str | None = None,
) -> dict[str, Any]:
    """An ``app_mention`` event body (``text`` should contain ``<@U0BOT>``)."""
    event: dict[str, Any] = {
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts or new_ts(),
        "client_msg_id": str(uuid.uuid4()),
    }
    event["event_ts"] = event["ts"]
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event_body(event)


def block_actions(
    message: dict[str, Any], *, value: str, user: str = "U0ANA", team_id: str = TEAM_ID
) -> dict[str, Any]:
    """A ``block_actions`` payload: ``user`` clicked the button with ``value`` on ``message``."""
    blocks = message.get("blocks") or []
    for block in blocks:
        for element in block.get("elements", []):
            if element.get("type") == "button" and element.get("value") == value:
                action = {
                    "type": "button",
                    "block_id": block["block_id"],
                    "action_id": element["action_id"],
                    "text": element["text"],
                    "value": value,
                    "action_ts": f"{time.time():.6f}",
                }
                break
        else:
            continue
        break
    else:
        raise AssertionError(f"no button with value {value!r} on the message")
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "ana", "team_id": team_id},
        "api_app_id": "A0LIFEBOT",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": message["channel"],
            "is_ephemeral": False,
        },
        "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:16]}",
        "team": {"id": team_id, "domain": "lifebot-test"},
        "channel": {"id": message["channel"], "name": "directmessage"},
        "message": {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "ts": message["ts"],
            "text": message["text"],
            "blocks": blocks,
            **({"thread_ts": message["thread_ts"]} if message.get("thread_ts") else {}),
        },
        "response_url": "https://hooks.slack.invalid/actions/never-called",
        "actions": [action],
    }


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Slack's request signature: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")."""
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def _json_arg(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _ok(**data: Any) -> web.Response:
    return web.json_response({"ok": True, **data})


def _error(error: str, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"ok": False, "error": error}, status=status, headers=headers)
