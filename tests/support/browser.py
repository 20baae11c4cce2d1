"""Helpers for the browser tests: Debian's chromium driven by Playwright, phone and desktop
screens, the main menu, confirm-first buttons, screenshots and the axe-core audit.
"""

from __future__ import annotations

import shutil
from asyncio import Runner
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.app.build import App

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent.parent
SHOTS = ROOT / "tmp" / "screenshots"
AXE = ROOT / "tests" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
"""axe-core, installed by ``make`` (``npm ci --prefix tests/a11y``)."""
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
"""A phone-sized screen (an iPhone 12-14's CSS pixels)."""
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 860}}
"""A laptop's screen."""
SCREENS = {"phone": PHONE, "desktop": DESKTOP}
TAP = 44
"""The smallest tap target, in CSS pixels (WCAG 2.5.5)."""


@pytest.fixture
def _function_scoped_runner(_module_scoped_runner: Runner) -> Runner:
    """In a browser test module, every test and async fixture runs on the module's loop.

    Playwright's driver and browser belong to the loop that started them, and starting them
    costs about two seconds of a loaded two-core machine: a module that imports this (as
    ``from tests.support.browser import _function_scoped_runner``) shares one browser among
    its tests (the ``browser`` fixture); each test still gets fresh contexts, apps and fakes.
    This overrides pytest-asyncio's own fixture of that name (pinned in constraints.txt).
    """
    return _module_scoped_runner


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def _chromium() -> AsyncIterator[Any]:
    """Headless chromium, the system one (no browser download), started once per module."""
    from playwright.async_api import async_playwright  # browser tests only

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        await chromium.close()


async def signed_in_page(
    application: App, base: str, browser: Any, user_id: int, screen: dict[str, Any] | None = None
) -> Any:
    """A new browser context signed in through a one-time link (a phone-sized screen unless
    told)."""
    context = await browser.new_context(**(screen or {"viewport": {"width": 420, "height": 900}}))
    page = await context.new_page()
    link = await application.web.auth.issue_link(user_id)
    await page.goto(f"{base}/login/{link.rsplit('/', 1)[1]}")
    await page.click("#signin")
    await page.wait_for_url(f"{base}/")
    return page


async def go(page: Any, label: str) -> None:
    """Follow a link of the main navigation, opening the More menu when it is in there."""
    nav = page.get_by_role("navigation", name="Main")
    link = nav.get_by_role("link", name=label, exact=True).filter(visible=True)
    if await link.count() == 0:
        await nav.locator("details.more summary").click()
        link = nav.get_by_role("link", name=label, exact=True).filter(visible=True)
    await link.click()


async def confirm(page: Any, scope: str, label: str) -> None:
    """Press a confirm-first button (Delete, Revoke...), then the button that does it."""
    await page.click(f"{scope} details.confirm summary:has-text('{label}')")
    await page.click(f"{scope} details.confirm[open] form button")


async def shot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Save a screenshot for reviewers (tmp/screenshots, not committed)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=full_page)
    return path


async def axe_problems(page: Any) -> list[str]:
    """Serious and critical problems axe-core finds on the page, one line each.

    axe is evaluated through the DevTools protocol, so the page's CSP does not block it.
    """
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(AXE.read_text())
    found = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => ['serious', 'critical'].includes(v.impact))"
        ".map(v => v.id + ' (' + v.impact + '): ' + v.help + ' at '"
        " + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))"
    )
    return list(found)


TARGETS = (
    "button, a.button, summary, nav a, select, textarea, label.attach, ol.sources a, "
    "a.source, li .open, input:not([type=hidden]):not([type=checkbox]):not(.sr-only-file)"
)
"""What a person taps: every control, menu link and source link (not links inside text)."""
_MEASURE = """([sel, tap]) => {
  const out = [];
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    // Not drawn (a closed <details> keeps its content laid out but hidden): not a target.
    if (!r.width || !r.height || !el.checkVisibility({visibilityProperty: true})) continue;
    if (r.height < tap - 0.5 || r.width < tap - 0.5) {
      const what = (el.textContent || el.name || '').trim().slice(0, 30);
      const size = `${Math.round(r.width)}x${Math.round(r.height)}`;
      out.push(`${el.tagName.toLowerCase()} "${what}" ${size}`);
    }
  }
  return out;
}"""


async def small_targets(page: Any) -> list[str]:
    """Visible tap targets smaller than 44x44 px, one line each."""
    return list(await page.evaluate(_MEASURE, [TARGETS, TAP]))
