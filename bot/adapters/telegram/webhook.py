"""Webhook mode: a small aiohttp server that accepts updates only with the right secret token.

Telegram sends the secret given to setWebhook in the ``X-Telegram-Bot-Api-Secret-Token``
header; a request without it (or with a wrong one) gets 401 and is never processed. Accepted
updates go onto PTB's update queue, so they are processed exactly like polled ones.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105  (a header name, not a secret)
MAX_BODY = 1_000_000
"""Updates are JSON; voice notes are fetched separately, so 1 MB is plenty."""

UpdateSink = Callable[[dict[str, Any]], Awaitable[None]]


class WebhookServer:
    """Listens on ``listen:port`` at ``path`` and hands verified updates to ``sink``."""

    def __init__(self, *, path: str, secret: str, listen: str, port: int, sink: UpdateSink) -> None:
        self.path = path or "/"
        self.secret = secret
        self.listen = listen
        self.port = port
        self.sink = sink
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Start listening (``port`` 0 picks a free port, stored back in ``port``)."""
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.listen, self.port)
        await site.start()
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[attr-defined]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("Telegram webhook listening on %s:%s%s", self.listen, self.port, self.path)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            log.warning("rejected a webhook request without the right secret token")
            return web.Response(status=401, text="unauthorized")
        try:
            update = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.Response(status=400, text="not JSON")
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            return web.Response(status=400, text="not a Telegram update")
        try:
            await self.sink(update)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a malformed update
            # Answer 200, or Telegram sends it again and again; one line, no traceback.
            log.warning("dropped a malformed webhook update %s: %s", update["update_id"], exc)
        return web.Response(text="ok")
