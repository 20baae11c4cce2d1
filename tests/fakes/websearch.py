"""A loopback fake of two web search APIs: SearXNG's JSON format and Brave Search's web search.

Each test scripts pages per query. A query nobody scripted is a failure (answered 500 and
recorded in ``problems``; ``check`` raises at teardown), never an invented result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BRAVE_KEY = "brave-test-key"


@dataclass
class Page:
    """One scripted search hit."""

    title: str
    url: str
    text: str


@dataclass
class FakeWebSearch:
    """The server: ``GET /search?q=..&format=json`` (SearXNG) and ``GET /res/v1/web/search``."""

    pages: dict[str, list[Page]] = field(default_factory=dict)
    """Hits by exact query."""
    queries: list[tuple[str, str]] = field(default_factory=list)
    """(backend, query) for every search made, in order."""
    problems: list[str] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    def add(self, query: str, *pages: Page) -> None:
        """Script the hits for ``query``."""
        self.pages[query] = list(pages)

    async def start(self) -> str:
        """Listen on a free loopback port; the base URL."""
        app = web.Application()
        app.router.add_get("/search", self._searxng)
        app.router.add_get("/res/v1/web/search", self._brave)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        """Shut down."""
        if self._runner is not None:
            await self._runner.cleanup()

    def check(self) -> None:
        """Fail on any unscripted query."""
        if self.problems:
            raise AssertionError("fake web search:\n  " + "\n  ".join(self.problems))

    def _hits(self, backend: str, query: str) -> list[Page] | None:
        self.queries.append((backend, query))
        if query not in self.pages:
            self.problems.append(f"unscripted {backend} query {query!r}")
            return None
        return self.pages[query]

    async def _searxng(self, request: web.Request) -> web.Response:
        if request.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")  # SearXNG's answer
        query = request.query.get("q", "")
        hits = self._hits("searxng", query)
        if hits is None:
            return web.Response(status=500)
        body: dict[str, Any] = {
            "query": query,
            "number_of_results": len(hits),
            "results": [
                {"url": p.url, "title": p.title, "content": p.text, "engine": "fake"} for p in hits
            ],
            "answers": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }
        return web.json_response(body)

    async def _brave(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return web.json_response({"type": "ErrorResponse"}, status=422)
        query = request.query.get("q", "")
        hits = self._hits("brave", query)
        if hits is None:
            return web.Response(status=500)
        count = int(request.query.get("count", "20"))
        results = [{"title": p.title, "url": p.url, "description": p.text} for p in hits[:count]]
        return web.json_response(
            {"type": "search", "query": {"original": query}, "web": {"results": results}}
        )
