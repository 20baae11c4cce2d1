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
from bot.messages import clean_texts
from storage.db import Database
from storage.models import MAX_ROW_ID


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
    owner: bool = False
    """The user is lifebot's owner (some tools, such as MCP servers, are the owner's only)."""

    @property
    def tz(self) -> ZoneInfo:
        """The user's time zone."""
        return ZoneInfo(self.timezone)

    @property
    def local_now(self) -> datetime:
        """Now, in the user's time zone."""
        return self.now.astimezone(self.tz)


ToolFn = Callable[[ToolContext, Any], Awaitable[str]]

MAX_ARGS_CHARS = 20_000
"""Tool arguments are short; a longer string is a runaway model, not a request."""
_NUMBER_RANGE = (-MAX_ROW_ID, MAX_ROW_ID)
"""Every integer a tool takes: ids fit the id columns (``INTEGER``), and no count, number of
days or year a person means comes near it. PostgreSQL's driver failed on a larger id (the
person got "something went wrong") where SQLite found nothing."""


def _out_of_range(value: Any, path: str = "arguments") -> str | None:
    """The path of the first integer out of ``_NUMBER_RANGE``, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if _NUMBER_RANGE[0] <= value <= _NUMBER_RANGE[1] else path
    if isinstance(value, dict):
        for key, item in value.items():
            if (found := _out_of_range(item, str(key))) is not None:
                return found
    if isinstance(value, list | tuple):
        for item in value:
            if (found := _out_of_range(item, path)) is not None:
                return found
    return None


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
    group: str = ""
    """The intent group the tool serves (tasks, reminders, calendar, memory, journal,
    location, time); the router's intent picks which groups are offered. Ungrouped tools
    are always offered."""
    schema: dict[str, Any] | None = None
    """The arguments' JSON schema when it comes from outside (an MCP server's tool): offered
    as it is, and ``params`` then only checks that the arguments are a JSON object."""
    audience: Callable[[ToolContext], bool] | None = None
    """Who may be offered and run it (None: everyone); to anyone else it does not exist."""

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        schema = dict(self.schema) if self.schema is not None else self.params.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }


Guard = Callable[[ToolContext, "Tool", Any], Awaitable[str | None]]
"""A check the controller runs before a state-changing call with valid arguments: the reason
to refuse it (the user's hard rules, say), or None to let it run."""


class ToolRegistry:
    """Looks tools up by name and runs them with validated arguments."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._guards: list[Guard] = []
        self._tools: dict[str, Tool] = {}
        self.intent_words: dict[str, str] = {}
        """Tool group -> the words that ask for it (a regular expression; "" when the group
        is picked by the question's kind). Filled from the features' declarations."""
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name}")
            self._tools[tool.name] = tool

    def add(self, tool: Tool) -> None:
        """Register one more tool."""
        self._tools[tool.name] = tool

    def add_intent(self, group: str, words: str) -> None:
        """Route messages using ``words`` to the tools of ``group`` (a feature's intent)."""
        if self.intent_words.get(group, words) != words:
            raise ValueError(f"two features declare the words of intent {group!r}")
        self.intent_words[group] = words

    def remove_intent(self, group: str) -> None:
        """Stop routing to ``group`` (an MCP server with words of its own went away)."""
        self.intent_words.pop(group, None)

    def remove(self, name: str) -> None:
        """Withdraw a tool (an MCP server that went away); unknown names are ignored."""
        self._tools.pop(name, None)

    def add_guard(self, guard: Guard) -> None:
        """Check every state-changing call with ``guard`` before it runs."""
        self._guards.append(guard)

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

    def tools(self) -> list[Tool]:
        """Every registered tool, in registration order."""
        return list(self._tools.values())

    def read_only_names(self) -> list[str]:
        """The tools that change nothing (the only ones offered in a tainted turn)."""
        return [n for n, t in self._tools.items() if t.read_only]

    def allowed(self, ctx: ToolContext, name: str) -> bool:
        """True when the tool exists and this turn's user may use it."""
        tool = self._tools.get(name)
        return tool is not None and (tool.audience is None or tool.audience(ctx))

    async def call(self, ctx: ToolContext, name: str, raw_args: str) -> tuple[str, bool]:
        """Run a tool; returns (result text, ok). Model-fixable problems come back as text.

        A tool this user may not use answers exactly as one that does not exist.
        """
        tool = self._tools.get(name)
        if tool is None or not self.allowed(ctx, name):
            available = ", ".join(n for n in self._tools if self.allowed(ctx, n))
            return f"error: there is no tool named {name!r}; available: {available}", False
        args = _parse_args(tool, raw_args)
        if isinstance(args, str):
            return args, False
        if not tool.read_only:
            for guard in self._guards:
                if (reason := await guard(ctx, tool, args)) is not None:
                    return f"error: not done: {reason}", False
        try:
            return await tool.run(ctx, args), True
        except ToolError as exc:
            return f"error: {exc}", False


def _parse_args(tool: Tool, raw_args: str) -> BaseModel | str:
    """Validated arguments, or the error text the model gets back to correct its call."""
    name = tool.name
    data = _load_object(raw_args)
    if isinstance(data, str):
        return data
    try:
        args = tool.params.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return f"error: invalid arguments for {name}: {problems}"
    if (where := _out_of_range(args.model_dump())) is not None:
        return (
            f"error: invalid arguments for {name}: {where}: number out of range "
            f"(ids and counts are at most {MAX_ROW_ID})"
        )
    return args


def _load_object(raw_args: str) -> dict[str, Any] | str:
    """The arguments as a JSON object, bounded in size and depth; or the error text."""
    if len(raw_args or "") > MAX_ARGS_CHARS:
        return f"error: arguments are longer than {MAX_ARGS_CHARS} characters"
    try:
        data = json.loads(raw_args or "{}")
    except json.JSONDecodeError as exc:
        return f"error: arguments are not valid JSON ({exc.msg}); send a JSON object"
    except RecursionError:
        return "error: arguments are nested too deeply; send a flat JSON object"
    if not isinstance(data, dict):
        return "error: arguments must be a JSON object"
    # a model's stray NUL or half emoji would be refused by validation or by PostgreSQL
    cleaned: dict[str, Any] = clean_texts(data)
    return cleaned
