"""How Slack reaches lifebot: the Bolt app, the HTTP endpoint, the Socket Mode connection.

Bolt runs our listeners before it answers Slack (``process_before_response``); the listeners
given here must therefore only translate and hand off, never wait for the agent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack.api import SlackCalls, error_code
from bot.adapters.slack.config import SlackOptions
from bot.adapters.slack.format import BUTTON_ACTION_PREFIX
from bot.errors import ChannelError, Unreachable

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
Listener = Callable[[dict[str, Any], dict[str, Any]], None]
"""Called with (body, event) or (body, action) while Slack waits for its ack."""


def build_bolt(
    *,
    client: AsyncWebClient,
    auth: AuthorizeResult,
    signing_secret: str | None,
    verify_requests: bool,
    on_event: Listener,
    on_button: Listener,
) -> AsyncApp:
    """The Bolt app: DMs and mentions, our buttons, and an ack for everything else.

    ``client`` is a token-less template (Bolt derives a per-request client from it); our own
    ``authorize`` answers from the auth.test done at start, so no request waits on Slack.
    """

    # Bolt passes arguments by parameter name (and would count ``self`` as one), so it gets
    # plain functions, not bound methods.
    async def authorize(
        enterprise_id: str | None, team_id: str | None, user_id: str | None
    ) -> AuthorizeResult:
        return auth  # one workspace, one token: always the same answer

    async def event_listener(body: dict[str, Any], event: dict[str, Any]) -> None:
        on_event(body, event)  # events are acked by Bolt itself

    async def button_listener(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        on_button(body, action)

    async def acknowledge(ack: Any) -> None:
        await ack()

    bolt = AsyncApp(
        name="lifebot",
        client=client,
        authorize=authorize,
        signing_secret=signing_secret or "",
        request_verification_enabled=verify_requests,
        process_before_response=True,
        logger=logging.getLogger("bot.adapters.slack.bolt"),
    )
    bolt.event("message")(event_listener)
    bolt.event("app_mention")(event_listener)
    bolt.action(re.compile("^" + re.escape(BUTTON_ACTION_PREFIX)))(button_listener)
    # Everything else is acknowledged too, so Slack never retries what we do not use.
    bolt.event(re.compile(".*"))(acknowledge)
    bolt.action(re.compile(".*"))(acknowledge)
    return bolt


def signature_headers_readable(headers: Mapping[str, str]) -> bool:
    """Whether Slack's signing headers, where present, are what Slack sends.

    The timestamp is whole seconds in ASCII digits and the signature ASCII: slack_sdk reads
    the one with ``int()`` ("abc" raised) and compares the other with
    ``hmac.compare_digest`` (a non-ASCII text raised). Missing headers are left to bolt,
    which refuses them itself.
    """
    stamp = headers.get("X-Slack-Request-Timestamp")
    if stamp is not None and not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12):
        return False
    signature = headers.get("X-Slack-Signature")
    return signature is None or signature.isascii()


async def serve_http(bolt: AsyncApp, host: str, port: int, path: str) -> tuple[web.AppRunner, str]:
    """Serve the Events API and interactivity at ``path``; (runner, the URL being served)."""

    async def handle(request: web.Request) -> web.Response:
        # Bolt checks X-Slack-Signature and the timestamp (stale after 5 minutes) first and
        # answers 401 without running any listener when either is wrong; what it cannot
        # parse, it raised on (a 500), so that is refused here the same way, unread.
        if not signature_headers_readable(request.headers):
            return web.json_response({"error": "invalid request"}, status=401)
        resp = await bolt.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(resp)

    web_app = web.Application(client_max_size=1024**2)
    web_app.router.add_post(path, handle)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound_port}{path}"


async def open_socket_url(client: AsyncWebClient, app_token: str, calls: SlackCalls) -> str:
    """A Socket Mode WebSocket URL (apps.connections.open); a bad app token says so."""
    try:
        resp = await calls.call(
            "apps.connections.open",
            functools.partial(client.apps_connections_open, app_token=app_token),
        )
    except Unreachable as exc:
        code = error_code(exc.__cause__) if isinstance(exc.__cause__, SlackApiError) else exc
        raise ChannelError(
            f"Slack rejected SLACK_APP_TOKEN ({code}): generate an app-level token with the "
            "connections:write scope (Basic Information -> App-Level Tokens)"
        ) from exc
    return str(resp["url"])


async def connect_socket(
    bolt: AsyncApp, app_token: str, calls: SlackCalls
) -> AsyncSocketModeHandler:
    """Open the Socket Mode connection; its envelopes go through ``bolt``."""
    handler = AsyncSocketModeHandler(
        bolt, app_token=app_token, logger=logging.getLogger("bot.adapters.slack.socket")
    )
    try:
        # Opening the URL ourselves first turns a bad app token into a clear error at start
        # instead of the client's endless reconnect loop.
        handler.client.wss_uri = await open_socket_url(bolt.client, app_token, calls)
        # slack_sdk leaves connect() unannotated.
        await asyncio.wait_for(handler.client.connect(), CONNECT_TIMEOUT)  # type: ignore[no-untyped-call]
    except BaseException as exc:
        await close_socket(handler)
        if isinstance(exc, TimeoutError):
            raise ChannelError(
                f"could not open Slack's Socket Mode connection in {CONNECT_TIMEOUT:g}s"
            ) from exc
        raise
    return handler


async def close_socket(handler: AsyncSocketModeHandler) -> None:
    """Close the Socket Mode client and await the tasks it started (it only cancels them)."""
    client = handler.client
    await handler.close_async()  # type: ignore[no-untyped-call]  # unannotated in slack_bolt
    tasks = [
        t
        for t in (client.message_processor, client.current_session_monitor, client.message_receiver)
        if t is not None
    ]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def probe(options: SlackOptions) -> str:
    """Check the Slack tokens (``lifebot doctor``): auth.test, and the app token in Socket Mode.

    Returns what was found in plain words; raises ChannelError with the cause otherwise.
    """
    calls = SlackCalls(attempts=0)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        client = AsyncWebClient(token=options.bot_token, base_url=options.api_url, session=session)
        auth = await calls.call("auth.test", client.auth_test)
        found = f"workspace {auth.get('team')} ({auth['team_id']}) as @{auth.get('user')}"
        if options.mode == "http":
            return f"{found}, HTTP mode on {options.http_path}"
        await open_socket_url(client, options.app_token or "", calls)
        return f"{found}, Socket Mode"
