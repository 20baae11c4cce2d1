"""The configured MCP servers' health, checked from a command (``lifebot mcp list``, doctor).

A command runs in its own process, apart from ``lifebot serve``: it reads the file, starts (or
reaches) each server once, lists its tools and stops it, all servers at the same time.
"""

from __future__ import annotations

import asyncio

from bot.mcp.client.config import ClientSettings, ServerFile
from bot.mcp.client.connection import Status, probe


async def probe_all(settings: ClientSettings) -> tuple[ServerFile, list[Status]]:
    """The servers file and each server's status, in the file's order."""
    config = await asyncio.to_thread(settings.load)
    statuses = await asyncio.gather(
        *(probe(spec, settings.deadline, settings.log_dir) for spec in config.servers)
    )
    return config, list(statuses)
