"""The configured MCP servers' health, checked from a command (``lifebot mcp list``, doctor).

A command runs in its own process, apart from ``lifebot serve``: it reads the file, starts (or
reaches) each server once, lists its tools and stops it, all servers at the same time.
"""

from __future__ import annotations

import asyncio

from bot.config import Settings, environment
from bot.mcp.client.config import ServerFile, load_servers
from bot.mcp.client.connection import Status, probe


async def probe_all(
    settings: Settings, known_intents: frozenset[str]
) -> tuple[ServerFile, list[Status]]:
    """The servers file and each server's status, in the file's order.

    ``known_intents`` are the intent groups the registered features declare.
    """
    config = await asyncio.to_thread(
        load_servers, settings.mcp_servers_file, environment, known_intents
    )
    statuses = await asyncio.gather(
        *(
            probe(spec, settings.mcp_call_timeout, settings.data_dir / "mcp")
            for spec in config.servers
        )
    )
    return config, list(statuses)
