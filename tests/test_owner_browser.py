"""The owner's control page in a real browser (issue 31): Chromium opens the served page, a
log line is written after it opened, and the page shows it without being reloaded; the
last job runs are there; nothing leaves loopback; without scripts the page still shows the
log as it was when loaded.
"""

from __future__ import annotations

import logging
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.app.build import App
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
SHOTS = Path(__file__).resolve().parent.parent / "tmp" / "screenshots"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
log = logging.getLogger("lifebot.test.tail")


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """Headless Debian chromium (no browser download)."""
    async with playwright_api.async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        await chromium.close()


async def _owner_page(application: App, base: str, browser: Any, **context: Any) -> Any:
    owner = await add_user(application, f"o{secrets.token_hex(3)}", owner=True, name="Olga")
    assert owner.id is not None
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900}, **context)
    page = await ctx.new_page()
    link = await application.web.auth.issue_link(owner.id)
    secret = link.rsplit("/", 1)[1]
    if context.get("java_script_enabled") is False:  # the sign-in page's form posts plainly
        await page.goto(f"{base}/login/{secret}")
    else:
        await page.goto(f"{base}/login/{secret}")
    await page.click("#signin")
    await page.wait_for_url(f"{base}/")
    return page


async def test_a_log_line_written_after_the_page_opened_appears_on_it(
    app_factory: AppFactory, fake_llm: FakeLLM, browser: Any
) -> None:
    application = await app_factory(fake_llm, web_port=0, jobs_heartbeat=0.5)
    await application.web.start()
    await application.presence.start()
    base = f"http://127.0.0.1:{application.web.server.bound_port}"
    await application.jobs.service.run_job("reminders.fire")
    await application.jobs.service.run_job("proposals.expire")

    page = await _owner_page(application, base, browser)
    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(urlsplit(r.url).hostname or r.url))
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    await page.goto(f"{base}/owner")
    runs = await page.inner_text("#run-table")
    assert "reminders.fire" in runs and "fired 0" in runs
    assert "proposals.expire" in runs
    await page.evaluate("window.openedOnce = true")  # gone if the page were reloaded

    said = f"the tail shows this line {secrets.token_hex(4)}"
    log.warning(said)  # written by the serving process, after the page opened
    line = page.locator("#log-lines li", has_text=said)
    await line.wait_for(timeout=15_000)
    assert await page.evaluate("window.openedOnce === true")  # live: no reload happened
    assert "WARNING" in await line.inner_text()
    assert "Live:" in await page.inner_text("#log-status")
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / "owner-control.png"), full_page=True)
    assert not problems, problems  # no CSP refusal, no script error
    assert hosts == {"127.0.0.1"}, hosts

    # Without scripts the page is the same, as it was when loaded: the line is there.
    plain = await _owner_page(application, base, browser, java_script_enabled=False)
    await plain.goto(f"{base}/owner")
    assert said in await plain.inner_text("#log-lines")
    assert "Reload" in await plain.inner_text("#log-status")
    await plain.context.close()
    await page.context.close()
