"""Typed tool definitions: JSON schema from pydantic models, arguments validated first.

The model proposes a call; the controller validates the arguments and decides. Invalid
arguments and ToolErrors go back to the model as a tool error it can correct; programming
errors are not hidden from us.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ValidationError

from bot.agent.sources import SourceLedger
from bot.errors import ToolError
from storage.db import Database


@dataclass(slots=True)
class ToolContext:
    """What a tool may touch: always exactly one user's data."""

    user_id: int
    db: Database
    now: datetime
    timezone: str
    conversation_id: int | None = None
    message_id: int | None = None
    """The stored inbound message this turn answers (tools cite it as the fact's source)."""
    sources: SourceLedger = field(default_factory=SourceLedger)
    """This turn's numbered sources: every stored item a tool shows is numbered here."""

    @property
    def tz(self) -> ZoneInfo:
        """The user's time zone."""
        return ZoneInfo(self.timezone)

    @property
    def local_now(self) -> datetime:
        """Now, in the user's time zone."""
        return self.now.astimezone(self.tz)


ToolFn = Callable[[ToolContext, Any], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool the model may call."""

    name: str
    description: str
    params: type[BaseModel]
    run: ToolFn
    label: str
    """Progress shown to the user while it runs, e.g. "Searching your notes…"."""
    read_only: bool = True
    """False for tools that change the user's state (facts, tasks, reminders, events,
    settings): they are withdrawn once a turn has read untrusted text."""
    untrusted_output: bool = False
    """True when results carry text the user did not just type: memory search, imports,
    pendant transcripts, other people's messages, web pages. Reading it taints the turn."""

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        schema = self.params.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }


class ToolRegistry:
    """Looks tools up by name and runs them with validated arguments."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name}")
            self._tools[tool.name] = tool

    def add(self, tool: Tool) -> None:
        """Register one more tool."""
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool with this name, if any."""
        return self._tools.get(name)

    def specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries, for all tools or the named ones."""
        wanted = set(names) if names is not None else None
        return [t.spec() for n, t in self._tools.items() if wanted is None or n in wanted]

    def names(self) -> list[str]:
        """Every registered tool name."""
        return list(self._tools)

    def read_only_names(self) -> list[str]:
        """The tools that change nothing (the only ones offered in a tainted turn)."""
        return [n for n, t in self._tools.items() if t.read_only]

    async def call(self, ctx: ToolContext, name: str, raw_args: str) -> tuple[str, bool]:
        """Run a tool; returns (result text, ok). Model-fixable problems come back as text."""
        tool = self._tools.get(name)
        if tool is None:
            return (
                f"error: there is no tool named {name!r}; available: {', '.join(self._tools)}",
                False,
            )
        try:
            data = json.loads(raw_args or "{}")
        except json.JSONDecodeError as exc:
            return f"error: arguments are not valid JSON ({exc.msg}); send a JSON object", False
        if not isinstance(data, dict):
            return "error: arguments must be a JSON object", False
        try:
            args = tool.params.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return f"error: invalid arguments for {name}: {problems}", False
        try:
            return await tool.run(ctx, args), True
        except ToolError as exc:
            return f"error: {exc}", False
