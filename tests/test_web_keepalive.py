"""A browser keeps its connection open between requests: each answer must come at once, not
after the client's delayed acknowledgement (about 40 ms a request on every page and API call
before the listening socket was made a TCP one asyncio sets TCP_NODELAY on)."""

from __future__ import annotations

import statistics
import time

import httpx

from bot.app.build import App
from bot.web.server import WebServer


async def test_requests_on_one_kept_alive_connection_are_answered_without_a_delay(
    app: App,
) -> None:
    server = WebServer(app.web.app, "127.0.0.1", 0)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.bound_port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            took = []
            for _ in range(21):  # one connection, reused
                start = time.perf_counter()
                r = await client.get("/healthz")
                took.append(time.perf_counter() - start)
                assert r.status_code == 200
    finally:
        await server.stop()
    # A delayed ACK costs 40 ms or more on Linux; an answer on loopback takes a few.
    assert statistics.median(took) < 0.025, f"median {statistics.median(took) * 1000:.1f} ms"
