"""Every ``pattern`` attribute in the page templates is a valid pattern for today's browsers.

Chromium compiles an input's ``pattern`` with the RegExp ``v`` flag, where a ``-`` or ``(``
left unescaped inside a character class is a syntax error; the browser then ignores the
pattern and accepts anything. Each template's patterns are compiled here the way Chromium
compiles them, and checked against a value they must accept and one they must refuse.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TEMPLATES = Path(__file__).resolve().parents[1] / "bot" / "web" / "templates"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")

_PATTERN = re.compile(r'\bpattern="([^"]*)"')


def _patterns() -> list[tuple[str, str]]:
    return [
        (path.name, m.group(1))
        for path in sorted(TEMPLATES.glob("*.html"))
        for m in _PATTERN.finditer(path.read_text())
    ]


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield await chromium.new_page()
        await chromium.close()


async def test_every_template_pattern_compiles_as_chromium_compiles_it(page: Any) -> None:
    found = _patterns()
    assert found, "no pattern attributes found: the test would check nothing"
    broken = []
    for template, pattern in found:
        error = await page.evaluate(
            "p => { try { new RegExp('^(?:' + p + ')$', 'v'); return null } "
            "catch (e) { return String(e) } }",
            pattern.replace("&amp;", "&"),
        )
        if error is not None:
            broken.append(f"{template}: {pattern}: {error}")
    assert not broken, broken


async def test_the_device_name_field_refuses_a_name_with_spaces(page: Any) -> None:
    html = (TEMPLATES / "devices.html").read_text()
    [pattern] = [p for t, p in _patterns() if t == "devices.html"]
    assert 'name="name"' in html
    await page.set_content(f'<form><input id="n" name="name" pattern="{pattern}"></form>')
    await page.fill("#n", "pendant-1")
    assert await page.evaluate("document.getElementById('n').validity.valid")
    await page.fill("#n", "my pendant!")
    assert await page.evaluate("document.getElementById('n').validity.patternMismatch")
