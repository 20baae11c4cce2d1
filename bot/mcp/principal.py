"""Who an MCP request acts for: one user, allowed to look, or to look and change.

Every request to lifebot's MCP server carries a principal. Over HTTP it is the personal API
token the request was authenticated with (``http.py`` puts it in the ASGI scope); over stdio
it is fixed when ``lifebot mcp serve`` starts (with ``--token``, the token is read again
for every request, so revoking it stops the server answering at once). A server middleware
binds it to the request (a context variable), so every tool and resource reads it the same
way and never takes a user id from its arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST

READ = "read"
"""The scope that may look."""
WRITE = "write"
"""The scope that may also change things."""
REVOKED = (
    "This token was revoked (or its user removed), so lifebot answers nothing more for it: "
    "make a new token on lifebot's Settings page and start the server with it."
)
"""The error every request gets once the token a stdio server runs as is no longer live."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The user an MCP request acts for, and whether it may change anything."""

    user_id: int
    can_write: bool
    via: str
    """How it was authenticated, for logs: ``token #3`` or ``stdio``."""

    def access_token(self, token_id: int) -> AccessToken:
        """The SDK's form of this principal (the HTTP scope's user)."""
        return AccessToken(
            token=f"apitoken:{token_id}",
            client_id=f"apitoken:{token_id}",
            scopes=[READ, WRITE] if self.can_write else [READ],
            subject=str(self.user_id),
        )


PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Awaitable["Principal | None"]]
"""How a server finds the principal of a request."""

_CURRENT: ContextVar[Principal | None] = ContextVar("lifebot_mcp_principal", default=None)


def current() -> Principal:
    """The principal of the request being served; a tool error when there is none."""
    found = _CURRENT.get()
    if found is None:
        raise ToolError("This request is not signed in: send a personal API token.")
    return found


def fixed(principal: Principal) -> PrincipalOf:
    """Every request acts for ``principal`` (stdio: one person runs one server)."""

    async def resolve(_ctx: ServerRequestContext[Any, Any]) -> Principal:
        return principal

    return resolve


def live(lookup: Callable[[], Awaitable[Principal | None]]) -> PrincipalOf:
    """Every request acts for what ``lookup`` finds now (stdio with a token: one query).

    ``lookup`` reads the token again; once it finds nothing (revoked, or its user removed),
    every request is answered with the MCP error ``REVOKED`` and nothing runs.
    """

    async def resolve(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
        found = await lookup()
        if found is None and ctx.request_id is not None:
            raise MCPError(code=INVALID_REQUEST, message=REVOKED)
        return found

    return resolve


async def from_http(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
    """The principal ``http.py`` authenticated this HTTP request as (None: no HTTP request)."""
    scope = getattr(ctx.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if not isinstance(user, AuthenticatedUser) or user.access_token.subject is None:
        return None
    token = user.access_token
    return Principal(int(token.subject or 0), WRITE in token.scopes, token.client_id)


def binder(resolve: PrincipalOf) -> Callable[..., Any]:
    """Server middleware that binds each request's principal for the tools to read."""

    async def bind(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        token = _CURRENT.set(await resolve(ctx))
        try:
            return await call_next(ctx)
        finally:
            _CURRENT.reset(token)

    return bind
