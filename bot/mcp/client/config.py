"""The MCP servers the operator lets lifebot use: one TOML or JSON file (LIFEBOT_MCP_SERVERS).

TOML::

    [servers.time]
    command = "python3"
    args = ["-m", "mcp_server_time", "--local-timezone", "Europe/Lisbon"]
    intents = ["time"]            # which requests offer its tools (see README)
    users = ["owner"]             # who may use it: owner (default), everyone, or user ids
    timeout = 10                  # seconds per call (default LIFEBOT_MCP_CALL_TIMEOUT)

    [servers.notes]
    url = "https://notes.example.com/mcp"
    headers_from = { Authorization = "NOTES_MCP_AUTH" }   # header <- environment variable
    words = ["notebook", "my notes app"]

JSON takes the same keys under ``mcpServers`` (the shape Claude Desktop uses) or ``servers``.
Secrets never sit in the file: ``headers_from`` and ``env_from`` name environment variables
(or ``.env`` lines), which ``bot.config.environment`` reads. Parsing is pure: every problem is
collected with the server's name and the fix, and a broken entry never stops the others.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
"""A server's name: it prefixes its tools' names, so short, lower case, no underscores."""
OWNER = "owner"
EVERYONE = "everyone"
_KEYS = {
    "command",
    "args",
    "env",
    "env_from",
    "url",
    "headers",
    "headers_from",
    "intents",
    "words",
    "users",
    "timeout",
    "tools",
}

Environment = Callable[[Iterable[str]], dict[str, str]]
"""Reads named environment variables (``bot.config.environment``)."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured MCP server, its secrets resolved."""

    name: str
    command: str | None = None
    """A program to start and talk to over stdio ..."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """... with these environment variables (values from the file and from ``env_from``)."""
    url: str | None = None
    """... or a streamable HTTP endpoint ..."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """... sent with these headers (values from the file and from ``headers_from``)."""
    intents: tuple[str, ...] = ()
    """Known intent groups its tools serve (time, calendar, memory, ...)."""
    words: tuple[str, ...] = ()
    """Words of its own that ask for its tools ("github", "pull request")."""
    users: tuple[str | int, ...] = (OWNER,)
    """Who may use it: ``owner``, ``everyone``, or user ids."""
    timeout: float | None = None
    """Seconds per call; None: LIFEBOT_MCP_CALL_TIMEOUT."""
    tools: tuple[str, ...] | None = None
    """Only these of its tools (None: all)."""
    missing: tuple[str, ...] = ()
    """Environment variables it needs that are not set: it is not started until they are."""

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command else "http"

    @property
    def target(self) -> str:
        """What it runs or reaches, for people (never a header or environment value)."""
        if self.command:
            return " ".join([self.command, *self.args])
        return self.url or ""


@dataclass
class ServerFile:
    """What the file configures: the servers, and every problem found (with the fix)."""

    servers: list[ServerSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_servers(
    path: Path | None, environment: Environment, known_intents: frozenset[str]
) -> ServerFile:
    """Read and check the servers file (no file configured: no servers, no problems).

    ``known_intents`` are the intent groups the registered features declare.
    """
    if path is None:
        return ServerFile()
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        return ServerFile(
            problems=[f"LIFEBOT_MCP_SERVERS: cannot read {path} ({exc.strerror}); fix the path."]
        )
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else tomllib.loads(raw)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        return ServerFile(problems=[f"LIFEBOT_MCP_SERVERS: {path} is not valid: {exc}."])
    entries = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return ServerFile(
            problems=[
                f"LIFEBOT_MCP_SERVERS: {path} needs a [servers.NAME] table per server "
                '(JSON: {"mcpServers": {"NAME": {...}}}).'
            ]
        )
    out = ServerFile()
    for name, entry in entries.items():
        spec, problems = parse_server(str(name), entry, environment, known_intents)
        out.problems.extend(f"MCP server {name!r}: {p}" for p in problems)
        if spec is not None:
            out.servers.append(spec)
    return out


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Where the operator's MCP servers are configured and how long a call may take."""

    servers_file: Path | None
    """LIFEBOT_MCP_SERVERS (None: no servers)."""
    deadline: float
    """LIFEBOT_MCP_CALL_TIMEOUT: seconds per call unless a server sets its own."""
    log_dir: Path
    """Where each stdio server's stderr is kept (``NAME.log``)."""
    environment: Environment
    """Reads the environment variables the file names (``bot.config.environment``)."""
    known_intents: frozenset[str]
    """The intent groups the registered features declare (a server may serve any of them)."""

    def load(self) -> ServerFile:
        """Read and check the servers file (blocking: call it off the event loop)."""
        return load_servers(self.servers_file, self.environment, self.known_intents)


def parse_server(  # noqa: PLR0911  (one check per key, each with its own words)
    name: str, entry: Any, environment: Environment, known_intents: frozenset[str]
) -> tuple[ServerSpec | None, list[str]]:
    """One server's entry: its spec (None when unusable) and the problems found."""
    if not NAME.match(name):
        return None, ["its name must be 1-24 lower-case letters, digits or -, starting a-z"]
    if not isinstance(entry, dict):
        return None, ["its entry must be a table of settings"]
    problems = [f"unknown setting {k!r} (ignored)" for k in entry if k not in _KEYS]
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        return None, [*problems, "give either command (stdio) or url (streamable HTTP)"]
    if command is not None and not (isinstance(command, str) and command.strip()):
        return None, [*problems, "command must be a program name or path"]
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        return None, [*problems, "url must start with http:// or https://"]
    strings = {k: _strings(entry.get(k, [])) for k in ("args", "intents", "words", "tools")}
    tables = {k: _table(entry.get(k, {})) for k in ("env", "env_from", "headers", "headers_from")}
    bad = [k for k, v in {**strings, **tables}.items() if v is None]
    if bad:
        return None, [
            *problems,
            f"{', '.join(bad)}: must be a list of strings / a table of strings",
        ]
    unknown = [i for i in strings["intents"] or () if i not in known_intents]
    if unknown:
        known = ", ".join(sorted(known_intents))
        return None, [*problems, f"unknown intents {unknown}; known: {known} (or use words)"]
    users = _users(entry.get("users", [OWNER]))
    if users is None:
        return None, [*problems, "users must list owner, everyone or user ids (numbers)"]
    timeout = entry.get("timeout")
    if timeout is not None and not (
        isinstance(timeout, int | float) and not isinstance(timeout, bool) and 0 < timeout <= 300
    ):
        return None, [*problems, "timeout must be a number of seconds, above 0 and at most 300"]
    wanted = {**(tables["env_from"] or {}), **(tables["headers_from"] or {})}
    found = environment(wanted.values())
    missing = tuple(sorted({v for v in wanted.values() if v not in found}))
    if missing:
        problems.append(f"set the environment variable(s) {', '.join(missing)} it needs")
    return (
        ServerSpec(
            name=name,
            command=command,
            args=tuple(strings["args"] or ()),
            env={
                **(tables["env"] or {}),
                **{k: found[v] for k, v in (tables["env_from"] or {}).items() if v in found},
            },
            url=url,
            headers={
                **(tables["headers"] or {}),
                **{k: found[v] for k, v in (tables["headers_from"] or {}).items() if v in found},
            },
            intents=tuple(strings["intents"] or ()),
            words=tuple(strings["words"] or ()),
            users=users,
            timeout=float(timeout) if timeout is not None else None,
            tools=tuple(strings["tools"]) if "tools" in entry and strings["tools"] else None,
            missing=missing,
        ),
        problems,
    )


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _table(value: Any) -> dict[str, str] | None:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


def _users(value: Any) -> tuple[str | int, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    out: list[str | int] = []
    for v in value:
        if v in (OWNER, EVERYONE) or (isinstance(v, int) and not isinstance(v, bool)):
            out.append(v)
        elif isinstance(v, str) and v.isdigit():
            out.append(int(v))
        else:
            return None
    return tuple(out)
