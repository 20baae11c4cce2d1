"""``/mcp`` on the web port, built when it is first needed: the SDK stays unloaded until then.

The MCP SDK takes most of a second to import. Every CLI command that opens the app (``users``,
``backup``, ``export``...) builds the MCP room, but only a serving web page, a request to
``/mcp`` or ``lifebot mcp serve`` uses the SDK; so the room holds this endpoint, which imports
``http.py`` and builds the server and its session manager the first time it is run or called.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from bot.mcp.data import LifebotData
    from bot.mcp.http import McpHttp, TokenLookup

PATH = "/mcp"
"""Where the web page serves MCP."""


class LazyMcpHttp:
    """The ``/mcp`` ASGI endpoint; the real one (``McpHttp``) is made on first use."""

    def __init__(
        self,
        data: LifebotData,
        token_of: TokenLookup,
        user_exists: Callable[[int], Awaitable[bool]],
        version: str,
    ) -> None:
        self.data = data
        self.token_of = token_of
        self.user_exists = user_exists
        self.version = version
        self._real: McpHttp | None = None

    def real(self) -> McpHttp:
        """The endpoint itself, built (and the SDK imported) the first time it is asked for."""
        if self._real is None:
            from bot.mcp.http import McpHttp  # noqa: PLC0415  (the SDK, only when used)
            from bot.mcp.principal import from_http  # noqa: PLC0415
            from bot.mcp.server import build_server  # noqa: PLC0415

            server = build_server(self.data, from_http, self.version)
            self._real = McpHttp(server, self.token_of, self.user_exists)
        return self._real

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request (authenticated by the real endpoint before anything else)."""
        await self.real()(scope, receive, send)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the SDK's session manager while the web page serves."""
        async with self.real().running():
            yield
