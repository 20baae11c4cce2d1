"""Streamable HTTP at ``/mcp`` on the web port, for personal API tokens only.

Every request is authenticated here before the SDK sees it: no token, or one that is unknown,
revoked or whose user is gone, is a 401 and nothing else. A good token becomes the ASGI
scope's ``user`` (the SDK's ``AuthenticatedUser``), which ``principal.from_http`` reads for
each request, so a token revoked mid-conversation stops working at once.

The SDK's session manager runs stateless with JSON answers: each POST is complete in itself,
so any lifebot process behind a load balancer can answer it (several processes share one
PostgreSQL database) and no session state has to be kept or bound to a token. Host/Origin
checks (DNS rebinding protection) are off on purpose: a browser page cannot add our bearer
token to a request, so a rebound name reaches nothing but the 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from bot.mcp.endpoint import PATH
from bot.mcp.principal import WRITE, Principal
from storage.models import ApiToken

log = logging.getLogger(__name__)

MAX_BODY = 1_000_000
"""A request body larger than this (bytes) is refused (413): tool arguments are small."""

TokenLookup = Callable[[str | None], Awaitable["ApiToken | None"]]
"""The live API token of an ``Authorization`` header (``WebAuth.api_token``)."""
UserExists = Callable[[int], Awaitable[bool]]


class McpHttp:
    """The ASGI endpoint: authenticate, then hand the request to the SDK's session manager."""

    def __init__(self, server: MCPServer, token_of: TokenLookup, user_exists: UserExists) -> None:
        self.server = server
        self.token_of = token_of
        self.user_exists = user_exists
        self._manager: StreamableHTTPSessionManager | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request."""
        if scope["type"] != "http":
            return
        principal = await self._principal(Headers(scope=scope).get("authorization"))
        if principal is None:
            await _unauthorized(send)
            return
        if scope["method"] != "POST":
            # Stateless and JSON-only: lifebot never speaks unasked, so a GET's event stream
            # would stay empty and open for ever (the spec's alternative is a 405), and there
            # is no session to DELETE.
            await _not_allowed(send)
            return
        manager = self._manager
        if manager is None:
            await _plain(send, 503, b"MCP is starting or stopping; try again in a moment.")
            return
        user, token_id = principal
        scope = {
            **scope,
            "user": AuthenticatedUser(user.access_token(token_id)),
            "auth": AuthCredentials(user.access_token(token_id).scopes),
        }
        await manager.handle_request(scope, receive, send)

    async def _principal(self, authorization: str | None) -> tuple[Principal, int] | None:
        token = await self.token_of(authorization)
        if token is None or token.id is None or not await self.user_exists(token.user_id):
            return None
        return Principal(token.user_id, token.scope == WRITE, f"token #{token.id}"), token.id

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the SDK's session manager while the web page serves (a fresh one each time).

        The manager lives in its own task: its task group must be entered and left by one
        task, and the web room may be started and stopped from different ones.
        """
        self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=MAX_BODY,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        ready, done = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            async with manager.run():
                ready.set()
                await done.wait()

        task = asyncio.create_task(run(), name="mcp-http")
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiter.cancel()
            await task  # raises why the manager did not start
        self._manager = manager
        try:
            yield
        finally:
            self._manager = None
            done.set()
            await task


async def _unauthorized(send: Send) -> None:
    body = {
        "error": "invalid_token",
        "error_description": "Send a personal API token as 'Authorization: Bearer lbk_...' "
        "(make one on lifebot's Settings page).",
    }
    await _json(send, 401, body, (b"www-authenticate", b'Bearer realm="lifebot"'))


async def _not_allowed(send: Send) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Method Not Allowed: send each JSON-RPC message as a POST; "
            "this endpoint keeps no sessions and opens no event streams.",
        },
    }
    await _json(send, 405, body, (b"allow", b"POST"))


async def _json(send: Send, status: int, body: object, header: tuple[bytes, bytes]) -> None:
    await _answer(send, status, b"application/json", json.dumps(body).encode(), [header])


async def _plain(send: Send, status: int, body: bytes) -> None:
    await _answer(send, status, b"text/plain", body, [])


async def _answer(
    send: Send, status: int, kind: bytes, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
