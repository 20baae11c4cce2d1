"""A loopback HTTP server serving one ICS feed whose body, status and pace a test changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import web


class FakeFeed:
    """Serves ``body`` at ``/cal.ics`` (and at ``[PREFIX/]calendar/NAME.ics``, the path lifebot
    publishes its own feeds at) with ``status``; ``/moved`` redirects to ``moved_to``; under
    ``/dav/`` it answers every WebDAV method with ``dav_body`` (a CalDAV server gone wrong);
    any other path is a failure (404)."""

    def __init__(self, body: bytes = b"") -> None:
        self.body = body
        """What the next GET returns."""
        self.status = 200
        """The next GET's status."""
        self.hits = 0
        """How many times the feed was fetched."""
        self.drip: float | None = None
        """Set: the feed sends one byte of ``body`` every this many seconds (a slow server)."""
        self.dav_body = b""
        """What every request under ``/dav/`` gets, as a 207 multi-status answer."""
        self.moved_to = "/cal.ics"
        """Where ``/moved`` redirects."""
        self.while_asked: Callable[[], Awaitable[None]] | None = None
        """Set: awaited (once) after the next GET arrives and before it is answered: what
        happens elsewhere while a reader waits for the feed."""
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen on a free loopback port; return the feed's URL."""
        app = web.Application()
        app.router.add_get("/cal.ics", self._feed)
        app.router.add_get("/moved", self._moved)
        app.router.add_route("*", "/dav/{rest:.*}", self._dav)
        app.router.add_get(r"/{prefix:(.+/)?}calendar/{name}", self._feed)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/cal.ics"
        return self.url

    async def stop(self) -> None:
        """Shut the server down."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _feed(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        meanwhile, self.while_asked = self.while_asked, None
        if meanwhile is not None:
            await meanwhile()
        if self.drip is None:
            return web.Response(body=self.body, status=self.status, content_type="text/calendar")
        slow = web.StreamResponse(status=self.status, headers={"Content-Type": "text/calendar"})
        await slow.prepare(request)
        with contextlib.suppress(ConnectionError):  # the client gave up
            for i in range(len(self.body)):
                await slow.write(self.body[i : i + 1])
                await asyncio.sleep(self.drip)
        return slow

    async def _dav(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.dav_body, status=207, content_type="application/xml")

    async def _moved(self, _request: web.Request) -> web.Response:
        raise web.HTTPFound(self.moved_to)
