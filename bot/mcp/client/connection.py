"""One MCP server lifebot uses: connected by a supervisor task, called under a deadline.

The supervisor owns the SDK client (its task groups must be entered and left by one task):
it connects (bounded), lists the tools, then watches: a call that fails because the server
went away, or a health ping that fails or hangs, ends the connection; the supervisor then
reconnects after a backoff of 1, 2, 4 ... 60 seconds (reset once a connection has lived a
minute). Calls come from turns (other tasks) and are each bounded by the server's deadline:
a server that hangs, crashes or answers garbage costs at most that long, and the caller gets
a plain error instead of a result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, Tool
from mcp_types.jsonrpc import CONNECTION_CLOSED
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from bot.mcp.client.config import ServerSpec
from bot.tls import httpx2_context

log = logging.getLogger(__name__)

CONNECT_SECONDS = 20.0
"""Starting a server and the handshake may take this long at most."""
PING_EVERY = 30.0
"""Seconds between health checks of a connected server."""
BACKOFF_FIRST, BACKOFF_MAX, STABLE = 1.0, 60.0, 60.0
"""Reconnect after 1 s, doubling to 60 s; a connection that lived STABLE seconds resets it."""
MAX_TOOLS = 100
"""At most this many tools are taken from one server (its listing is paged)."""
MAX_MESSAGE_BYTES = 4 << 20
"""Longest message (one line) a stdio server may write; past it the server is stopped.

A tool's result reaches the model cut to 8,000 characters (``tools.MAX_RESULT``), so 4 MB
leaves room for any useful message while the SDK's reader (which joins an unfinished line
again with every read) stays cheap."""
GUARD = Path(__file__).with_name("stdio_guard.py")
"""The relay a stdio server runs behind (``stdio_guard.py``: why it is a process)."""


class McpUnavailable(Exception):
    """The server cannot answer now (down, restarting, too slow): the message says so."""


class McpCallFailed(Exception):
    """The server answered the call with a protocol error (unknown tool, bad arguments)."""


@dataclass(frozen=True, slots=True)
class Status:
    """What ``lifebot mcp list`` and ``doctor`` show of one server."""

    name: str
    state: str
    """``up``, ``starting``, ``down`` (retrying), ``waiting`` (a secret is missing), ``off``."""
    detail: str
    tools: tuple[str, ...] = ()
    restarts: int = 0


ToolsChanged = Callable[["ServerConnection", list[Tool]], None]
"""Told each time the server's tools come (after a connection) or go (an empty list)."""


class ServerConnection:
    """The supervisor, the deadline and the health of one configured server."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        deadline: float,
        log_dir: Path,
        on_tools: ToolsChanged,
        ping_every: float = PING_EVERY,
        connect_seconds: float = CONNECT_SECONDS,
        backoff_first: float = BACKOFF_FIRST,
    ) -> None:
        self.spec = spec
        self.deadline = spec.timeout or deadline
        """Seconds one call may take."""
        self.log_dir = log_dir
        self.on_tools = on_tools
        self.ping_every = ping_every
        self.connect_seconds = connect_seconds
        self.backoff_first = backoff_first
        """The first reconnect's wait; it doubles with each failure up to ``BACKOFF_MAX``."""
        self.state = "waiting" if spec.missing else "starting"
        self.detail = f"needs {', '.join(spec.missing)}" if spec.missing else "starting"
        self.tools: list[Tool] = []
        self.restarts = 0
        self.last_wait: float | None = None
        """Seconds waited before the latest reconnect (None before the first)."""
        self.first_attempt = asyncio.Event()
        """Set once the first connection attempt has ended (up or not)."""
        self._client: Client | None = None
        self._broken = False
        """The connection failed under a call: reconnect."""
        self._check = False
        """A call timed out: check the server's health now."""
        self._wake: anyio.Event | None = None
        """Wakes the watcher (anyio's: the watcher runs inside the SDK's cancel scopes)."""
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._pid_file: Path | None = None
        """Where the stdio relay wrote its pid (its process group's id), once started."""

    def status(self) -> Status:
        """The server's state now."""
        return Status(
            self.spec.name,
            self.state,
            self.detail,
            tuple(t.name for t in self.tools),
            self.restarts,
        )

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the supervisor (a server missing a secret is not started at all)."""
        if self.spec.missing:
            self.first_attempt.set()
            return
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.spec.name}")

    async def stop(self) -> None:
        """Stop the supervisor and the server (a stdio process is ended by the SDK)."""
        self._stopping.set()
        self._poke(broken=True)
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout=15)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None

    async def _supervise(self) -> None:
        delay = self.backoff_first
        while not self._stopping.is_set():
            began = time.monotonic()
            try:
                await self._connected_once()
            except Exception as exc:  # noqa: BLE001  (any failure of a server is its own)
                self.detail = describe(exc)
                log.warning("MCP server %s: %s", self.spec.name, self.detail)
            finally:
                self._withdraw()
                self.first_attempt.set()
            if self._stopping.is_set():
                break
            if time.monotonic() - began >= STABLE:
                delay = self.backoff_first
            self.state = "down"
            self.restarts += 1
            log.info("MCP server %s: reconnecting in %.0f s", self.spec.name, delay)
            self.last_wait = delay
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
            delay = min(delay * 2, BACKOFF_MAX)
        self.state = "off"

    async def _connected_once(self) -> None:
        """Connect, take the tools, and serve calls until the connection breaks.

        The connect deadline is a cancel scope around the client's whole life (the SDK's task
        groups must nest inside it), lifted once the tools are listed.
        """
        with anyio.CancelScope(deadline=anyio.current_time() + self.connect_seconds) as scope:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client_for(stack))
                tools = await listed_tools(client, self.spec)
                scope.deadline = math.inf
                self._broken = self._check = False
                self._client = client
                self.tools = tools
                self.state, self.detail = "up", f"{len(tools)} tool(s)"
                self.on_tools(self, tools)
                self.first_attempt.set()
                log.info("MCP server %s is up with %d tool(s)", self.spec.name, len(tools))
                hung = await self._watch(client)
                self._withdraw()  # before the SDK takes its time to end the process
                if hung:
                    self._end_hung_process()
        if scope.cancelled_caught:
            raise TimeoutError(f"not ready within {self.connect_seconds:g} s")

    def _withdraw(self) -> None:
        """No more calls through this connection; its tools leave the agent's offer."""
        self._client = None
        if self.state == "up":
            self.state = "down"
        if self.tools:
            self.tools = []
            self.on_tools(self, [])

    def _poke(self, *, broken: bool = False, check: bool = False) -> None:
        """Tell the watcher the connection broke, or that a health check is due."""
        self._broken = self._broken or broken
        self._check = self._check or check
        if self._wake is not None:
            self._wake.set()

    async def _watch(self, client: Client) -> bool:
        """Watch until the connection breaks, the server fails a check, or lifebot stops.

        True when the server is hung: its health check ran out of time.
        """
        while not self._stopping.is_set():
            if not (self._broken or self._check):
                self._wake = anyio.Event()
                with anyio.move_on_after(self.ping_every):
                    await self._wake.wait()
            if self._broken or self._stopping.is_set():
                self.detail = self.detail if self.state != "up" else "connection lost"
                return False
            self._check = False
            try:
                with anyio.fail_after(self.deadline):
                    await health_check(client)
            except Exception as exc:  # noqa: BLE001  (a hung or dead server: reconnect it)
                self.detail = f"did not answer a health check ({describe(exc)})"
                return isinstance(exc, TimeoutError)
        return False

    def _end_hung_process(self) -> None:
        """SIGTERM a hung stdio server's process group (the relay leads it) now.

        The SDK would first close its stdin and give it 2 s to exit on its own: a server that
        could not answer a health check will not, and its tools stay away meanwhile. If the
        signal does not end it, the SDK's own escalation (SIGTERM, then SIGKILL) still runs.
        """
        path, self._pid_file = self._pid_file, None
        if path is None or sys.platform == "win32":
            return
        try:
            pid = int(path.read_text(encoding="ascii"))
            if pid > 1 and os.getpgid(pid) == pid:  # still the relay's group, not a new one
                os.killpg(pid, signal.SIGTERM)
        except (OSError, ValueError) as exc:  # gone already, or no pid written
            log.debug("MCP server %s: not signalled (%s)", self.spec.name, exc)

    @asynccontextmanager
    async def _client_for(self, stack: AsyncExitStack) -> AsyncIterator[Client]:
        spec = self.spec
        if spec.command:
            errlog = stack.enter_context(_server_log(self.log_dir, spec.name))
            pid_file = stack.enter_context(_pid_file(self.log_dir, spec.name))
            self._pid_file = pid_file
            params = StdioServerParameters(
                command=sys.executable,
                # -I: the relay needs only the standard library; nothing of the environment
                # changes how it starts (the server itself gets the environment unchanged).
                args=[
                    "-I",
                    str(GUARD),
                    "--pid-file",
                    str(pid_file),
                    str(MAX_MESSAGE_BYTES),
                    _program(spec.command, spec.env.get("PATH")),
                    *spec.args,
                ],
                env=dict(spec.env),
            )
            transport = stdio_client(params, errlog=errlog)
        else:
            assert spec.url is not None
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(spec.headers),
                    timeout=self.deadline + 5,
                    verify=httpx2_context(),
                )
            )
            transport = streamable_http_client(spec.url, http_client=http)
        async with Client(transport) as client:
            yield client

    # --- calls -----------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one tool within the deadline; McpUnavailable or McpCallFailed in plain words."""
        client = self._client
        name = self.spec.name
        if client is None:
            raise McpUnavailable(f"the {name} server is not available right now ({self.detail})")
        try:
            with anyio.fail_after(self.deadline):
                return await client.call_tool(tool, arguments)
        except TimeoutError as exc:
            self._poke(check=True)  # hung, or only slow? a check under the same deadline tells
            raise McpUnavailable(
                f"the {name} server did not answer within {self.deadline:g} s"
            ) from exc
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:  # the process died or the stream ended
                self._poke(check=True)  # a check on a closed connection fails: reconnect
                raise McpUnavailable(
                    f"the {name} server closed the connection; it is being restarted"
                ) from exc
            raise McpCallFailed(f"the {name} server refused the call: {exc}") from exc
        except Exception as exc:
            self.detail = describe(exc)
            self._poke(broken=True)
            raise McpUnavailable(
                f"the {name} server failed ({describe(exc)}); it is being restarted"
            ) from exc


def _program(command: str, path: str | None) -> str:
    """The server's program as a path; a missing one is named here, not by the relay."""
    found = shutil.which(command, path=path)
    if found is None:
        raise FileNotFoundError(f"the command {command!r} was not found")
    return found


async def health_check(client: Client) -> None:
    """One round trip to the server: a ping before 2026-07-28, else an uncached tools/list.

    The 2026-07-28 revision of the protocol removed ``ping`` (the SDK refuses it outside the
    legacy mode), so a modern server is asked for its first page of tools instead.
    """
    if client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        await client.send_ping()
    else:
        await client.list_tools(cache_mode="bypass")


async def listed_tools(client: Client, spec: ServerSpec) -> list[Tool]:
    """The server's tools (every page, at most MAX_TOOLS), only those the operator allowed."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(10):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    if spec.tools is not None:
        tools = [t for t in tools if t.name in spec.tools]
    return tools[:MAX_TOOLS]


async def probe(spec: ServerSpec, deadline: float, log_dir: Path) -> Status:
    """Connect once, list the tools and disconnect (``lifebot mcp list``, ``doctor``)."""
    if spec.missing:
        return Status(spec.name, "waiting", f"needs {', '.join(spec.missing)}")
    conn = ServerConnection(spec, deadline=deadline, log_dir=log_dir, on_tools=lambda *_: None)
    tools: list[Tool] = []
    try:
        with anyio.move_on_after(max(conn.deadline, CONNECT_SECONDS)) as scope:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(conn._client_for(stack))
                tools = await listed_tools(client, spec)
    except Exception as exc:  # noqa: BLE001  (report any failure of the server)
        return Status(spec.name, "down", describe(exc))
    if scope.cancelled_caught:
        return Status(spec.name, "down", "did not start and list its tools in time")
    return Status(spec.name, "up", f"{len(tools)} tool(s)", tuple(t.name for t in tools))


def describe(exc: BaseException) -> str:
    """A failure in a few plain words (the innermost of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


@contextlib.contextmanager
def _pid_file(log_dir: Path, name: str) -> Iterator[Path]:
    """A file of this connection's own for the relay's pid, removed with the connection.

    Its own (not ``NAME.pid``): several lifebot processes, or ``lifebot mcp list`` beside
    ``serve``, run the same server at once, and one must never signal another's.
    """
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, raw = tempfile.mkstemp(prefix=f"{name}.", suffix=".pid", dir=log_dir)
    os.close(fd)
    path = Path(raw)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _server_log(log_dir: Path, name: str) -> Iterator[TextIO]:
    """The server's stderr goes to ``log_dir/NAME.log`` (owner-only), appended."""
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = log_dir / f"{name}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    handle: TextIO = os.fdopen(fd, "a", encoding="utf-8")
    try:
        yield handle
    finally:
        handle.close()
