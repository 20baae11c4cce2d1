"""Runs the web app with uvicorn inside lifebot's own event loop (a tracked task)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator

import uvicorn
from fastapi import FastAPI

from bot.errors import ConfigError

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # lifebot's CLI owns SIGINT/SIGTERM and stops the web server with everything else.
        yield


class WebServer:
    """Start and stop serving ``app`` on ``host``:``port`` (port 0 picks a free one)."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def serving(self) -> bool:
        """True while the socket is listening."""
        return self._server is not None and bool(self._server.servers)

    @property
    def bound_port(self) -> int:
        """The port actually listened on."""
        assert self._server is not None
        assert self._server.servers
        sock = self._server.servers[0].sockets[0]
        return int(sock.getsockname()[1])

    async def start(self) -> None:
        """Listen; returns once the socket is bound (ConfigError when the port is taken)."""
        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            # uvicorn's loggers get no handlers or levels of their own: their lines (its own
            # 500s included) go through lifebot's handler, level and redaction.
            log_config=None,
            log_level=None,
            lifespan="off",
            access_log=False,
            proxy_headers=True,
            server_header=False,
        )
        # Bind here so a taken port is a plain OSError, not uvicorn's exit of the process.
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP named explicitly: asyncio turns Nagle off (TCP_NODELAY) only on sockets
        # whose protocol says TCP, and accepted sockets inherit it. With proto 0 every answer
        # on a kept-alive connection waited out the client's delayed ACK (~40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                [
                    f"The web page cannot listen on {self.host}:{self.port} ({exc.strerror}): "
                    "set LIFEBOT_WEB_PORT to a free port, or LIFEBOT_WEB_ENABLED=false."
                ]
            ) from exc
        sock.set_inheritable(True)
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="web-server")
        while not self._server.started:
            if self._task.done():
                await self._task  # raises the bind error
                raise OSError(f"the web server could not listen on {self.host}:{self.port}")
            await asyncio.sleep(0.02)
        log.info("web page on http://%s:%d", self.host, self.bound_port)

    async def stop(self) -> None:
        """Stop serving (open requests get a moment to finish)."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(self._task, timeout=10)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._server = None
        self._task = None
