"""Builds the MCP room from the app's collaborators (the composition root calls ``build_mcp``).

One function, typed collaborators, no globals, so the room can be declared as one feature:
it serves ``/mcp`` on the web port (when LIFEBOT_MCP_HTTP is on), makes stdio servers for
``lifebot mcp serve``, and owns the clients of the MCP servers the operator configured.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from bot.agent.tools.base import ToolRegistry
from bot.mcp.client.config import ClientSettings
from bot.mcp.data import LifebotData
from bot.mcp.endpoint import PATH, LazyMcpHttp
from bot.web.room import Endpoint, WebCore

if TYPE_CHECKING:
    # The MCP SDK (most of a second to import) loads only when a server or client is used:
    # CLI commands that open the app never need it.
    from mcp.server.mcpserver import MCPServer

    from bot.mcp.client.hub import McpClients
    from bot.mcp.principal import PrincipalOf


def lifebot_version() -> str:
    """The installed lifebot's version (what the server reports to clients)."""
    try:
        return version("lifebot")
    except PackageNotFoundError:
        return "0"


@dataclass
class McpRoom:
    """lifebot as an MCP server (stdio and HTTP), and the clients of the operator's servers."""

    data: LifebotData
    """Every read and change the server offers, per principal."""
    http: LazyMcpHttp | None
    """The ``/mcp`` endpoint on the web port (None when LIFEBOT_MCP_HTTP is off)."""
    client_settings: ClientSettings
    """Where the servers lifebot uses are configured."""
    tools: ToolRegistry
    """The agent's registry, where the servers' tools and their intent words go."""
    clients: McpClients | None = None
    """The servers' connections, once started."""

    def endpoints(self) -> list[Endpoint]:
        """What the web page serves for this room: ``/mcp`` when LIFEBOT_MCP_HTTP is on."""
        if self.http is None:
            return []
        return [Endpoint(PATH, self.http, self.http.running)]

    def stdio_server(self, principal_of: PrincipalOf) -> MCPServer:
        """A server whose every request acts for whom ``principal_of`` finds (``mcp serve``)."""
        from bot.mcp.server import build_server  # noqa: PLC0415  (the SDK, only when used)

        return build_server(self.data, principal_of, lifebot_version())

    async def start_clients(self) -> McpClients | None:
        """Read the servers file and start every server's connection (returns at once).

        None when no server is configured and the file named no problem: the SDK (about a
        second of CPU to import) is then never loaded, so ``serve`` starts that much sooner.
        """
        if self.clients is None:
            config = await asyncio.to_thread(self.client_settings.load)
            if not config.servers and not config.problems:
                return None
            from bot.mcp.client.hub import McpClients  # noqa: PLC0415  (the SDK, only when used)

            self.clients = McpClients(
                config,
                tools=self.tools,
                deadline=self.client_settings.deadline,
                log_dir=self.client_settings.log_dir,
            )
            self.clients.start()
        return self.clients

    async def close(self) -> None:
        """Stop the servers lifebot started."""
        if self.clients is not None:
            await self.clients.stop()


def build_mcp(
    *,
    web: WebCore,
    tools: ToolRegistry,
    serve_http: bool,
    client_settings: ClientSettings,
) -> McpRoom:
    """Wire the MCP room (no I/O); with ``serve_http`` it has an ``/mcp`` endpoint for the page.

    It takes the web's core (sign-in and the page's operations), not the web room: the room
    is built after it, with this room's endpoints among its own.
    """
    data = LifebotData(web.service, tools)
    http: LazyMcpHttp | None = None
    if serve_http:
        service = web.service

        async def user_exists(user_id: int) -> bool:
            return await service.accounts.user(user_id) is not None

        http = LazyMcpHttp(data, web.auth.api_token, user_exists, lifebot_version())
    return McpRoom(data, http, client_settings, tools)
