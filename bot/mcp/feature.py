"""MCP's declaration: lifebot's memory for other agents, and other servers' tools for lifebot."""

from __future__ import annotations

from bot.feature import Access, Feature, FileKind, Route, Secret

FEATURE = Feature(
    name="mcp",
    about="The Model Context Protocol both ways: a person's memory offered to their other AI "
    "agents (stdio and /mcp), and the tools of MCP servers the operator configured offered "
    "to lifebot by intent, as untrusted text.",
    files=(
        FileKind(
            "mcp-logs",
            "what each MCP server lifebot started wrote to its stderr",
            per_user=False,
            derived=True,
        ),
    ),
    secrets=(Secret("MCP token for lifebot mcp serve", setting="mcp_token"),),
    routes=(Route("/mcp", Access.BEARER, max_body=1_000_000),),
)
"""MCP's declaration (issue 32). The servers' own tools are lent at run time
(``mcp__SERVER__TOOL``), each with the intent the operator or the server names."""
