"""Builds the MCP room from the app's collaborators (the composition root calls ``build_mcp``).

One function, typed collaborators, no globals, so the room can be declared as one feature:
it serves ``/mcp`` on the web port (when LIFEBOT_MCP_HTTP is on), makes stdio servers for
``lifebot mcp serve``, and owns the clients of the MCP servers the operator configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from mcp.server.mcpserver import MCPServer

from bot.agent.tools.base import ToolRegistry
from bot.mcp.data import LifebotData
from bot.mcp.http import PATH, McpHttp
from bot.mcp.principal import Principal, fixed, from_http
from bot.mcp.server import build_server
from bot.web.room import Endpoint, WebRoom


def lifebot_version() -> str:
    """The installed lifebot's version (what the server reports to clients)."""
    try:
        return version("lifebot")
    except PackageNotFoundError:
        return "0"


@dataclass
class McpRoom:
    """lifebot as an MCP server (stdio and HTTP)."""

    data: LifebotData
    """Every read and change the server offers, per principal."""
    http: McpHttp | None
    """The ``/mcp`` endpoint on the web port (None when LIFEBOT_MCP_HTTP is off)."""

    def stdio_server(self, principal: Principal) -> MCPServer:
        """A server whose every request acts for ``principal`` (``lifebot mcp serve``)."""
        return build_server(self.data, fixed(principal), lifebot_version())


def build_mcp(*, web: WebRoom, tools: ToolRegistry, serve_http: bool) -> McpRoom:
    """Wire the MCP room; with ``serve_http`` the web page also serves it at ``/mcp``."""
    data = LifebotData(web.service, tools)
    http: McpHttp | None = None
    if serve_http:
        service = web.service

        async def user_exists(user_id: int) -> bool:
            return await service.user(user_id) is not None

        http = McpHttp(
            build_server(data, from_http, lifebot_version()), web.auth.api_token, user_exists
        )
        web.add_endpoint(Endpoint(PATH, http, http.running))
    return McpRoom(data, http)
