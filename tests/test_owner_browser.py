"""The owner's control page in a real browser (issue 31): Chromium opens the served page, a
log line is written after it opened, and the page shows it without being reloaded; the
last job runs are there; nothing leaves loopback; without scripts the page still shows the
log as it was when loaded.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.app.build import App
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user
from tests.support.browser import (  # noqa: F401  (one browser per module)
    AXE,
    CHROMIUM,
    SCREENS,
    _chromium,
    _function_scoped_runner,
    axe_problems,
    shot,
    small_targets,
)

pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
log = logging.getLogger("lifebot.test.tail")


async def _owner_page(application: App, base: str, browser: Any, **context: Any) -> Any:
    owner = await add_user(application, f"o{secrets.token_hex(3)}", owner=True, name="Olga")
    assert owner.id is not None
    context.setdefault("viewport", {"width": 1280, "height": 900})
    ctx = await browser.new_context(**context)
    page = await ctx.new_page()
    link = await application.web.auth.issue_link(owner.id)
    await page.goto(f"{base}/login/{link.rsplit('/', 1)[1]}")
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
    await shot(page, "owner-control")
    assert not problems, problems  # no CSP refusal, no script error
    assert hosts == {"127.0.0.1"}, hosts

    # Without scripts the page is the same, as it was when loaded: the line is there.
    plain = await _owner_page(application, base, browser, java_script_enabled=False)
    await plain.goto(f"{base}/owner")
    assert said in await plain.inner_text("#log-lines")
    assert "Reload" in await plain.inner_text("#log-status")
    await plain.context.close()
    await page.context.close()


@pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed: make (npm ci)")
@pytest.mark.parametrize("screen", ["phone", "desktop"])
async def test_the_full_control_page_passes_axe_with_44px_targets(
    app_factory: AppFactory, fake_llm: FakeLLM, browser: Any, screen: str
) -> None:
    application = await app_factory(fake_llm, web_port=0)
    await application.web.start()
    await application.presence.start()
    assert await application.jobs.service.lock.acquire(application.clock.now())
    await application.jobs.service.run_job("reminders.fire")
    failed = f"something failed, for the page to show ({secrets.token_hex(3)})"
    log.error(failed)
    base = f"http://127.0.0.1:{application.web.server.bound_port}"
    # axe runs past the page's CSP in this context; the page is the same.
    page = await _owner_page(application, base, browser, bypass_csp=True, **SCREENS[screen])
    await page.goto(f"{base}/owner")
    await page.locator("#log-lines li", has_text=failed).wait_for()
    await page.click("#config summary")  # every setting shown too
    found = await axe_problems(page) + [f"small target {t}" for t in await small_targets(page)]
    assert found == [], found
    await page.context.close()
