"""Every MCP server lifebot uses: started with the app, their tools in the agent's registry.

When a server's connection comes up its tools are added to the registry (grouped by intent);
when it goes down they are withdrawn, so the model is not offered what cannot answer. The
intent words of servers that have their own (``words``, or several intents) are added to the
registry's intents, beside the ones every feature declares.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from mcp.types import Tool as McpTool

from bot.agent.intent import words_pattern
from bot.agent.tools.base import ToolRegistry
from bot.mcp.client.config import ServerFile, ServerSpec
from bot.mcp.client.connection import BACKOFF_FIRST, PING_EVERY, ServerConnection, Status
from bot.mcp.client.tools import adapt, declared_intents

log = logging.getLogger(__name__)


def own_group(server: str) -> str:
    """The intent group of a server that has words of its own."""
    return f"mcp:{server}"


def group_for(
    spec: ServerSpec, declared: Iterable[str], known: Mapping[str, str]
) -> tuple[str, str | None]:
    """The group a server's tools serve, and the words to add for it (None: a known group).

    ``known`` is every intent group the registry routes, with its words.

    The operator's ``intents``/``words`` win over what the server declared. One known intent
    is that group; several, or words of its own, make a group named after the server whose
    words are all of theirs. Nothing at all: a group no rule matches, so its tools are offered
    only when a request's intent is unclear (then every tool is).
    """
    intents = list(spec.intents) or [i for i in dict.fromkeys(declared) if i in known]
    if len(intents) == 1 and not spec.words:
        return intents[0], None
    pieces = [known[i] for i in intents if known.get(i)]
    words = words_pattern(spec.words)
    if words is not None:
        pieces.append(words.pattern)
    if not pieces:
        return own_group(spec.name), None
    return own_group(spec.name), "|".join(f"(?:{p})" for p in pieces)


class McpClients:
    """The configured servers' connections and the tools they lend the agent."""

    def __init__(
        self,
        config: ServerFile,
        *,
        tools: ToolRegistry,
        deadline: float,
        log_dir: Path,
        ping_every: float = PING_EVERY,
        backoff_first: float = BACKOFF_FIRST,
    ) -> None:
        self.config = config
        self.registry = tools
        self.connections = [
            ServerConnection(
                spec,
                deadline=deadline,
                log_dir=log_dir,
                on_tools=self._tools_changed,
                ping_every=ping_every,
                backoff_first=backoff_first,
            )
            for spec in config.servers
        ]
        self._registered: dict[str, list[str]] = {}

    def _tools_changed(self, conn: ServerConnection, tools: list[McpTool]) -> None:
        name = conn.spec.name
        for old in self._registered.pop(name, []):
            self.registry.remove(old)
        self.registry.remove_intent(own_group(name))
        if not tools:
            return
        declared = (i for t in tools for i in declared_intents(t))
        group, words = group_for(conn.spec, declared, self.registry.intent_words)
        if words is not None:
            self.registry.add_intent(group, words)
        added = []
        for tool in tools:
            adapted = adapt(conn, tool, group)
            if adapted is None:
                log.warning("MCP server %s: tool %s has an unusable schema", name, tool.name)
                continue
            if self.registry.get(adapted.name) is not None:
                log.warning("MCP server %s: tool name %s is taken", name, adapted.name)
                continue
            self.registry.add(adapted)
            added.append(adapted.name)
        self._registered[name] = added

    def start(self) -> None:
        """Start every server's supervisor (returns at once; see ``wait_ready``)."""
        for problem in self.config.problems:
            log.warning("%s", problem)
        for conn in self.connections:
            conn.start()

    async def wait_ready(self, within: float) -> bool:
        """Wait until every server's first connection attempt ended; False on timeout."""
        waits = [c.first_attempt.wait() for c in self.connections]
        if not waits:
            return True
        try:
            async with asyncio.timeout(within):
                await asyncio.gather(*waits)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop every server (their stdio processes end)."""
        await asyncio.gather(*(c.stop() for c in self.connections))

    def statuses(self) -> list[Status]:
        """Each configured server's state now."""
        return [c.status() for c in self.connections]
