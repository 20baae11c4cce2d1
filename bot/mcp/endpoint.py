"""``/mcp`` on the web port, built when it is first needed: the SDK stays unloaded until then.

The MCP SDK takes most of a second to import. Every CLI command that opens the app (``users``,
``backup``, ``export``...) builds the MCP room, but only a serving web page, a request to
``/mcp`` or ``lifebot mcp serve`` uses the SDK; so the room holds this endpoint, which imports
``http.py`` and builds the server and its session manager the first time it is called. A
serving web page only marks it as wanted: the session manager starts with the first request to
``/mcp`` (the SDK imported in a thread, off the event loop), so ``serve`` does not pay for
MCP unless someone uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
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
        self._serving = False
        self._started: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()

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
        if self._serving and self._started is None:
            await self._start()
        await self.real()(scope, receive, send)

    async def _start(self) -> None:
        """Import the SDK in a thread, then start the session manager (once)."""
        async with self._lock:
            if self._started is not None or not self._serving:
                return
            for module in ("bot.mcp.http", "bot.mcp.principal", "bot.mcp.server"):
                await asyncio.to_thread(importlib.import_module, module)
            stack = contextlib.AsyncExitStack()
            await stack.enter_async_context(self.real().running())
            self._started = stack

    @property
    def started(self) -> bool:
        """Whether the SDK's session manager runs (after the first request while serving)."""
        return self._started is not None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the web page serves: requests may start the session manager; stop it after."""
        self._serving = True
        try:
            yield
        finally:
            self._serving = False
            async with self._lock:
                started, self._started = self._started, None
            if started is not None:
                await started.aclose()
