"""Helpers for the MCP tests: an imported conversation, the SDK's own client on both transports,
and small MCP servers the tests write with the SDK (run as real processes)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from bot.app.build import App
from bot.app.importer import import_file
from tests.support.cli import lifebot_script

ROOT = Path(__file__).resolve().parent.parent.parent
"""The checkout these tests belong to."""

KAYAK = [
    ("k1", "2024-03-02T09:58:00+00:00", "Rui", "shall we go kayaking at Arrabida on Saturday?"),
    ("k2", "2024-03-02T10:00:00+00:00", "me", "yes! kayaking at Arrabida, I'll bring the dry bags"),
    ("k3", "2024-03-02T10:05:00+00:00", "Rui", "great, meet at the harbour at 8"),
    ("k4", "2024-03-05T18:00:00+00:00", "Rui", "the bakery on Rua Augusta closes early now"),
]
"""An imported chat: who said what, when, under the ids of the export file."""


async def import_chat(
    app: App, user_id: int, tmp_path: Path, rows: list[tuple[str, str, str, str]]
) -> None:
    """Import ``rows`` (id, ts, speaker, text) as the user's chat history, indexed."""
    path = tmp_path / f"chat-{user_id}.jsonl"
    lines = [
        json.dumps({"id": i, "ts": ts, "speaker": who, "text": text, "conversation": "Rui"})
        for i, ts, who, text in rows
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    report = await import_file(app.db, user_id, path)
    assert report.added == len(rows)
    await app.memory.after_import(user_id, report.conversations)


@asynccontextmanager
async def http_client(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client on streamable HTTP, sending ``token`` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


@asynccontextmanager
async def stdio_lifebot(tmp_path: Path, env: dict[str, str], *args: str) -> AsyncIterator[Client]:
    """The SDK's client on a real ``lifebot mcp serve ARGS`` process (stderr to a log file).

    The process imports this checkout's code (PYTHONPATH), not the installed one's.
    """
    params = StdioServerParameters(
        command=str(lifebot_script()),
        args=["mcp", "serve", *args],
        env={"PYTHONPATH": str(ROOT), **env},
        cwd=tmp_path,
    )
    with (tmp_path / "mcp-serve.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    """A successful tool result's JSON."""
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


def text_of(result: CallToolResult) -> str:
    """A tool result's text blocks, joined."""
    return "\n".join(getattr(block, "text", "") for block in result.content)


def server_script(tmp_path: Path, name: str, body: str) -> Path:
    """A small MCP server written with the SDK's ``MCPServer``, saved as ``name``.py.

    ``body`` declares tools on ``server``; the script serves it over stdio.
    """
    source = (
        "from mcp.server.mcpserver import MCPServer\n"
        f"server = MCPServer({name!r})\n"
        f"{textwrap.dedent(body)}\n"
        "server.run()\n"
    )
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return path


def python() -> str:
    """This interpreter (the one with the SDK installed)."""
    return sys.executable
