"""``/api/docs`` works offline (issue 31): Chromium draws every operation of the API from
files lifebot serves itself, and no request leaves loopback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory
from tests.support.browser import (  # noqa: F401  (one browser per module)
    AXE,
    CHROMIUM,
    _chromium,
    _function_scoped_runner,
    axe_problems,
    shot,
)

pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


async def test_the_api_reference_draws_every_operation_with_nothing_from_elsewhere(
    app_factory: AppFactory, fake_llm: FakeLLM, browser: Any
) -> None:
    application = await app_factory(fake_llm, web_port=0)
    await application.web.start()
    base = f"http://127.0.0.1:{application.web.server.bound_port}"
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    asked: list[str] = []
    outside: list[str] = []

    async def only_loopback(route: Any) -> None:
        url = route.request.url
        asked.append(url)
        if urlsplit(url).hostname != "127.0.0.1" and not url.startswith("data:"):
            outside.append(url)
            await route.abort()  # as if offline: nothing else is reachable
        else:
            await route.continue_()

    await page.route("**/*", only_loopback)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    answer = await page.goto(f"{base}/api/docs")
    assert answer is not None and answer.status == 200
    csp = answer.headers["content-security-policy"]
    assert "http" not in csp and "script-src 'self'" in csp  # no other host, no inline script
    doc = await (await page.request.get(f"{base}/api/openapi.json")).json()
    operations = sum(len(item) for item in doc["paths"].values())
    blocks = page.locator(".opblock")
    await blocks.nth(operations - 1).wait_for(timeout=20_000)
    assert await blocks.count() == operations
    assert "lifebot" in await page.inner_text(".info .title")
    assert await page.locator(".btn.authorize").count() == 1  # the bearer scheme
    assert await page.get_by_text("/api/v1/memory/search", exact=True).count() >= 1
    # Open one operation: its parameters and its problem-details errors are drawn.
    await page.locator(".opblock-summary", has_text="/api/v1/facts").first.click()
    body = page.locator(".opblock-body").first
    await body.wait_for()
    drawn = await body.inner_text()
    assert "cursor" in drawn and "application/problem+json" in drawn
    await shot(page, "api-docs", full_page=False)

    assert not outside, outside
    assert {urlsplit(u).path for u in asked} >= {
        "/api/docs",
        "/api/docs/swagger-ui-bundle.js",
        "/api/docs/swagger-ui.css",
        "/static/api-docs.js",
        "/api/openapi.json",
    }
    assert not problems, problems  # no CSP refusal, no script error
    other = await page.request.get(f"{base}/api/docs/index.html")
    assert other.status == 404  # only the two files lifebot needs are served
    if AXE.exists():  # axe-core comes from npm (make); evaluated past the page's CSP
        assert await axe_problems(page) == []
    await context.close()
