"""The web chat and the phone-first page in a real browser (issue 31's "done when"), with the
sign-in forgery of issue 29 tried from another site's page.

Playwright drives Debian's chromium against the running server on a loopback port, at a
phone's and a desktop's size; the LLM is the loopback fake; axe-core audits every page.
Screenshots land in tmp/screenshots (the README's come from there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web

from bot.app.build import App
from storage.repos.people import ContactRepo
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, Step, call, say
from tests.support.app import add_user
from tests.support.browser import (  # noqa: F401  (one browser per module)
    AXE,
    CHROMIUM,
    SCREENS,
    _chromium,
    _function_scoped_runner,
    axe_problems,
    go,
    shot,
    signed_in_page,
    small_targets,
)
from tests.support.documents import pdf
from tests.support.web import seed

if TYPE_CHECKING:  # playwright is optional: the module skips without it
    from playwright.async_api import FileChooser

pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")

ANSWER = "You play the cello on Tuesdays [1], at the music school after work."


def agent(fake_llm: FakeLLM, *answers: Step) -> None:
    """The smart model answers with ``answers`` in order; the fast one routes to the agent
    (and its after-turn work finds nothing)."""
    steps = list(answers)

    def respond(body: dict[str, Any]) -> Step | None:
        if body.get("model") != "fake-smart":
            return say('{"route": "agent"}')
        return steps.pop(0) if steps else None

    fake_llm.default = respond


def watch(page: Any) -> list[str]:
    """Script errors and CSP refusals the page reports (none is expected)."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.append(str(e)))
    return seen


@pytest.mark.parametrize("screen", ["phone", "desktop"])
async def test_chat_stream_citation_pdf_undo_and_a_town_for_the_zone(
    served: tuple[App, str], browser: Any, fake_llm: FakeLLM, tmp_path: Path, screen: str
) -> None:
    application, base = served
    ann = await add_user(application, "ann", owner=True, name="Ann")
    assert ann.id is not None
    cello = await seed(application, ann, "I play the cello on Tuesdays")
    agent(
        fake_llm,
        call("search_memory", {"query": "cello"}),
        Step(text=ANSWER, chunk_size=3, chunk_delay=0.04),  # a slow model: it streams
        call("search_memory", {"query": "monthly rent"}),
        say("The monthly rent is 950 EUR [1]."),
    )
    page = await signed_in_page(application, base, browser, ann.id, SCREENS[screen])
    problems = watch(page)

    # Ask in the chat (Enter sends) and see the answer being written.
    await go(page, "Chat")
    await page.wait_for_url(f"{base}/chat")
    here = page.locator("nav [aria-current=page]").filter(visible=True)
    assert await here.inner_text() == "Chat"
    await page.fill("#chat-text", "when do I play the cello?")
    await page.press("#chat-text", "Enter")
    partial = await page.wait_for_function(
        "() => { const p = document.querySelector('li.bubble.bot.writing p.text');"
        " return p && p.textContent.length > 0 ? p.textContent : null; }"
    )
    assert 0 < len(await partial.json_value()) < len(ANSWER)  # seen before it was whole
    sources = page.locator("li.bubble.bot ol.sources a")
    await sources.first.wait_for()
    last = page.locator("li.bubble.bot").last
    assert (await last.locator("p.text").inner_text()).startswith("You play the cello on Tuesdays")
    assert "I play the cello on Tuesdays" in await sources.first.inner_text()
    await shot(page, f"chat-{screen}", full_page=False)

    # The citation opens the cited turn.
    await last.locator("a.cite").click()
    await page.wait_for_url(f"{base}/memory/message/{cello.message_id}*")
    assert "cello" in await page.inner_text("li.cited")

    # Attach a PDF in the same box and ask about it.
    lease = tmp_path / "lease.pdf"
    lease.write_bytes(pdf("Flat lease of Ann", "The monthly rent is 950 EUR"))
    await go(page, "Chat")
    await page.set_input_files("#chat-file", str(lease))
    assert await page.inner_text("#chat-file-name") == "lease.pdf"
    await page.fill("#chat-text", "what is my monthly rent?")
    await page.click("#chat-send")
    await page.locator("li.bubble.bot", has_text="The monthly rent is 950 EUR").wait_for()
    log = await page.inner_text("#chat-log")
    assert "I read lease.pdf (2 pages)" in log and "File: lease.pdf" in log
    rent = page.locator("li.bubble.bot").last.locator("ol.sources a")
    assert "lease.pdf p. 2" in await rent.inner_text()

    # Forget a fact, then undo it.
    await go(page, "Facts")
    await page.click(f"#fact-{cello.fact_id} button:has-text('Forget')")
    assert "Forgotten: I play the cello on Tuesdays" in await page.inner_text(".note")
    assert page.url == f"{base}/facts"  # the fact's words never go into the URL
    assert await page.locator(f"#fact-{cello.fact_id}").count() == 0
    await page.click(".note button:has-text('Undo')")
    assert "Kept: I play the cello on Tuesdays" in await page.inner_text(".note")
    assert await page.locator(f"#fact-{cello.fact_id}").count() == 1

    # Set the time zone by typing a town: the list offers it with its zone.
    await go(page, "Settings")
    await page.fill("#timezone", "")
    await page.type("#timezone", "Porto", delay=30)
    await page.wait_for_function(
        "() => [...document.querySelectorAll('#zone-list option')]"
        ".some(o => o.value === 'Porto, Portugal' && o.label === 'Europe/Lisbon')"
    )
    await page.fill("#timezone", "Porto, Portugal")
    await page.click("form.stack button.primary")
    assert "Time zone: Europe/Lisbon (Porto, Portugal)" in await page.inner_text(".note")
    async with application.db.session() as s:
        stored = await UserRepo(s).get(ann.id)
    assert stored is not None and stored.timezone == "Europe/Lisbon"
    assert problems == []  # no script error, no CSP refusal
    await page.context.close()


async def test_the_chat_works_with_the_keyboard_alone(
    served: tuple[App, str], browser: Any, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    application, base = served
    ann = await add_user(application, "ann", name="Ann")
    assert ann.id is not None
    agent(fake_llm, say("Hello Ann, how can I help?"))
    page = await signed_in_page(application, base, browser, ann.id, SCREENS["phone"])
    await page.goto(f"{base}/chat")

    async def tab_to(selector: str) -> None:
        for _ in range(40):
            await page.keyboard.press("Tab")
            if await page.evaluate(f"document.activeElement.matches('{selector}')"):
                return
        raise AssertionError(f"Tab never reaches {selector}")

    await tab_to("#chat-text")
    await page.keyboard.type("hello")
    await page.keyboard.press("Enter")
    await page.locator("li.bubble.bot", has_text="Hello Ann, how can I help?").wait_for()
    # The page puts the cursor back in the text box when the answer is complete: wait for
    # that, as a person would, or the Tab walk below races it on a loaded machine.
    await page.locator("form#write:not([aria-busy])").wait_for()
    await page.wait_for_function("document.activeElement.id === 'chat-text'")
    # The file is chosen from the keyboard too: Tab to Attach, Space opens the chooser.
    note = tmp_path / "note.pdf"
    note.write_bytes(pdf("Gym opens at 7"))
    # Listen for the chooser before walking to it: Playwright turns on its interception
    # without waiting for the browser, so a listener added just before the key press lost
    # the race on a loaded machine and the chooser opened unseen.
    chooser: asyncio.Future[FileChooser] = asyncio.get_running_loop().create_future()
    page.once("filechooser", lambda got: chooser.set_result(got))  # noqa: PLW0108 (playwright needs a Python function, not a bound builtin)
    await tab_to("#chat-file")
    await page.keyboard.press("Space")
    await (await asyncio.wait_for(chooser, 30)).set_files(str(note))
    await tab_to("#chat-send")
    await page.keyboard.press("Enter")
    await page.locator("li.bubble.bot", has_text="I read note.pdf").wait_for()
    assert "File: note.pdf" in await page.inner_text("#chat-log")
    await page.context.close()


async def test_without_scripts_the_chat_is_a_form_that_reloads_with_the_answer(
    served: tuple[App, str], browser: Any, fake_llm: FakeLLM
) -> None:
    application, base = served
    ann = await add_user(application, "ann", name="Ann")
    assert ann.id is not None
    agent(fake_llm, say("Good morning, Ann."))
    context = await browser.new_context(java_script_enabled=False, **SCREENS["phone"])
    page = await context.new_page()
    link = await application.web.auth.issue_link(ann.id)
    await page.goto(f"{base}/login/{link.rsplit('/', 1)[1]}")
    await page.click("#signin")
    await go(page, "Chat")
    await page.fill("#chat-text", "good morning")
    await page.click("#chat-send")
    await page.wait_for_url(f"{base}/chat#end")
    log = await page.inner_text("#chat-log")
    assert "good morning" in log and "Good morning, Ann." in log
    await context.close()


async def _seed_every_page(application: App, ann_id: int) -> int:
    """Something on every page; returns the seeded conversation turn's id."""
    ann = await application.web.service.accounts.user(ann_id)
    assert ann is not None
    seeded = await seed(application, ann, "I play the cello on Tuesdays")
    await application.web.service.reminders.add_reminder(ann, "tomorrow at 9 to call mom")
    await application.web.service.devices.add_device(ann, "pendant-1")
    await application.location.add_place(ann_id, "gym", 52.5150, 13.3800)
    async with application.db.session() as s:
        await ContactRepo(s).add(ann_id, "Ana Silva", relationship="sister")
    return seeded.message_id


@pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed: make (npm ci)")
@pytest.mark.parametrize("screen", ["phone", "desktop"])
async def test_every_page_passes_axe_with_44px_targets_and_a_one_row_menu(
    served: tuple[App, str], browser: Any, fake_llm: FakeLLM, screen: str
) -> None:
    application, base = served
    ann = await add_user(application, "ann", owner=True, name="Ann")
    assert ann.id is not None
    turn = await _seed_every_page(application, ann.id)
    agent(fake_llm, call("search_memory", {"query": "cello"}), say("On Tuesdays [1]."))
    # axe runs in a context that lets it in past the page's CSP; the pages are the same.
    context = await browser.new_context(bypass_csp=True, **SCREENS[screen])
    page = await context.new_page()
    link = await application.web.auth.issue_link(ann.id)
    audited: dict[str, list[str]] = {}

    async def audit(name: str) -> None:
        audited[name] = await axe_problems(page) + [
            f"small target {t}" for t in await small_targets(page)
        ]

    await page.goto(f"{base}/signin")
    await audit("signin")
    await page.goto(f"{base}/login/{link.rsplit('/', 1)[1]}")
    await audit("login")
    await page.click("#signin")
    await page.wait_for_url(f"{base}/")
    await page.goto(f"{base}/chat")
    await page.fill("#chat-text", "when do I play the cello?")
    await page.click("#chat-send")
    await page.wait_for_selector("li.bubble.bot ol.sources a")
    pages = [
        "/chat",
        "/",
        "/memory",
        "/memory?q=cello",
        f"/memory/message/{turn}",
        "/upload",
        "/journal",
        "/facts",
        "/memory/file",
        "/reminders",
        "/calendar",
        "/calendars",
        "/places",
        "/contacts",
        "/devices",
        "/settings",
        "/owner",
        "/delete",
        "/memory/message/999999",  # the 404 page
    ]
    for path in pages:
        await page.goto(base + path)
        await audit(path)
        if path.endswith("999999"):
            continue  # the error page has no menu
        header = await page.locator("header").bounding_box()
        assert header is not None and header["height"] <= 50, f"{path}: the menu takes >1 row"
        if path in ("/chat", "/", "/memory", "/facts", "/settings", "/owner"):
            marked = page.locator("nav [aria-current=page], nav summary.here, nav .here-narrow")
            assert await marked.filter(visible=True).count() >= 1, f"{path}: not marked"
    # The menu open, and a confirm-first button open.
    await page.goto(f"{base}/reminders")
    await page.click("nav details.more summary")
    await audit("/reminders, menu open")
    await page.click("nav details.more summary")
    await page.click("ul.cards details.confirm summary")
    await audit("/reminders, Cancel asked")
    await shot(page, f"reminders-confirm-{screen}")
    await context.close()
    problems = {name: found for name, found in audited.items() if found}
    assert problems == {}, problems


@pytest.fixture
async def other_site() -> AsyncIterator[tuple[str, dict[str, str]]]:
    """A page on another origin that posts a form to lifebot (``form`` holds its fields)."""
    form: dict[str, str] = {}

    async def page(_request: web.Request) -> web.Response:
        fields = "".join(
            f'<input type="hidden" name="{k}" value="{v}">' for k, v in form.items() if k != "to"
        )
        html = (
            "<!doctype html><title>Win a prize</title>"
            f'<form method="post" action="{form["to"]}">{fields}'
            '<button id="prize">Claim your prize</button></form>'
        )
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/", form
    await runner.cleanup()


async def test_another_site_cannot_sign_a_visitor_in_as_the_attacker(
    served: tuple[App, str], browser: Any, other_site: tuple[str, dict[str, str]]
) -> None:
    application, base = served
    mallory = await add_user(application, "mallory", name="Mallory")
    assert mallory.id is not None
    secret = (await application.web.auth.issue_link(mallory.id)).rsplit("/", 1)[1]
    # The attacker opens their own link's page for its token, then sets the trap with both.
    own = await browser.new_context()
    mine = await own.new_page()
    await mine.goto(f"{base}/login/{secret}")
    token = await mine.get_attribute("input[name=token]", "value")
    assert token
    url, form = other_site
    form.update(to=f"{base}/login", secret=secret, token=token)

    victim = await browser.new_context()
    page = await victim.new_page()
    await page.goto(url)
    async with page.expect_navigation() as answered:
        await page.click("#prize")
    response = await answered.value
    assert response is not None and response.status == 403
    assert "did not come from lifebot's own sign-in page" in await page.inner_text("main")
    assert not [c for c in await victim.cookies() if c["name"] == "lifebot_session"]
    await page.goto(f"{base}/")
    assert page.url == f"{base}/signin"  # not signed in as anyone
    # The link was not spent by the trap: its owner still signs in with it.
    await mine.click("#signin")
    await mine.wait_for_url(f"{base}/")
    await own.close()
    await victim.close()
