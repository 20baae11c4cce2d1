"""The web page in a real browser: Playwright driving Debian's chromium against the running
server on a loopback port. Screenshots of each page land in tmp/screenshots (not committed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app.build import App
from storage.models import PairingRequest
from storage.repos.pairing import PairingRepo
from tests.fakes.ics_feed import FakeFeed
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user
from tests.support.browser import (  # noqa: F401  (one browser per module)
    CHROMIUM,
    _chromium,
    _function_scoped_runner,
    confirm,
    go,
    shot,
    signed_in_page,
)
from tests.support.calendars import ics_body
from tests.support.documents import pdf
from tests.support.web import seed

pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


async def test_a_person_manages_memory_reminders_events_and_devices(
    served: tuple[App, str], browser: Any
) -> None:
    application, base = served
    ann = await add_user(application, "ann", owner=True, name="Ann")
    assert ann.id is not None
    seeded = await seed(application, ann, "I play the cello on Tuesdays")
    page = await signed_in_page(application, base, browser, ann.id)
    await shot(page, "today")

    # Accept a proposed event: it lands in the calendar.
    await page.click(f"#proposal-{seeded.proposal_id} button:has-text('Accept')")
    assert "Added" in await page.inner_text(".note")
    await page.goto(f"{base}/calendar")
    assert "Dinner of Ann" in await page.inner_text("main")
    await page.click("button:has-text('Turn on the calendar feed')")
    feed = await page.inner_text("#feed-url")
    assert feed.endswith(".ics")
    await shot(page, "calendar")

    # Search memory, see the hit highlighted, open its source at the cited turn.
    await page.goto(f"{base}/memory")
    await page.fill("input[name=q]", "cello")
    await page.click("button:has-text('Search')")
    assert "cello" in (await page.inner_text("ol.hits mark")).lower()
    await shot(page, "memory")
    await page.click("ol.hits a.source >> nth=0")
    cited = page.locator("li.cited")
    assert "cello" in await cited.inner_text()
    await shot(page, "conversation")

    # Forget a fact.
    await page.goto(f"{base}/facts")
    await shot(page, "facts")
    await page.click(f"#fact-{seeded.fact_id} button:has-text('Forget')")
    assert "Forgotten" in await page.inner_text(".note")
    assert await page.locator(f"#fact-{seeded.fact_id}").count() == 0
    assert page.url == f"{base}/facts"  # the fact's words are not in the URL

    # Create a reminder in words, then cancel it.
    await page.goto(f"{base}/reminders")
    await page.fill("input[name=text]", "tomorrow at 9 to call mom")
    await page.click("button:has-text('Remind me')")
    assert "call mom" in await page.inner_text("ul.cards")
    await shot(page, "reminders")
    await confirm(page, "ul.cards", "Cancel")
    assert "Cancelled" in await page.inner_text(".note")
    assert await page.locator("ul.cards").count() == 0

    # Add a pendant: the token is shown once with a QR code; then revoke it.
    await page.goto(f"{base}/devices")
    await page.fill("input[name=name]", "pendant-1")
    await page.click("button:has-text('Add a pendant')")
    token = await page.inner_text("#device-token")
    assert token.startswith("lbd_")
    qr_width = await page.locator("img.qr").evaluate("img => img.naturalWidth")
    assert qr_width > 0  # the QR code renders (a data: URI the page's CSP allows)
    await shot(page, "devices")
    await confirm(page, "ul.cards", "Revoke")
    assert "no longer works" in await page.inner_text(".note")
    assert await application.web.service.devices.devices(ann) and all(
        d.revoked_at is not None for d in await application.web.service.devices.devices(ann)
    )

    await page.goto(f"{base}/settings")
    await shot(page, "settings")
    await page.context.close()


async def test_the_owner_approves_a_pairing_and_others_see_nothing_of_anns(
    served: tuple[App, str], browser: Any
) -> None:
    application, base = served
    ann = await add_user(application, "ann", owner=True, name="Ann")
    bob = await add_user(application, "bob", name="Bob")
    assert ann.id is not None and bob.id is not None
    anns = await seed(application, ann, "my bank PIN hint is the cat")
    now = application.clock.now()
    async with application.db.session() as s:
        await PairingRepo(s).add(
            PairingRequest(
                code="KX7P2QRM",
                channel="fake",
                account="acct",
                sender_id="carol",
                chat_id="carol",
                display_name="Carol",
                created_at=now,
                expires_at=now + timedelta(hours=1),
            )
        )

    page = await signed_in_page(application, base, browser, ann.id)
    await page.goto(f"{base}/owner")
    await shot(page, "owner")
    await page.click("#pairing-KX7P2QRM button:has-text('Approve')")
    assert "Approved Carol" in await page.inner_text(".note")
    assert "Carol" in await page.inner_text("table")
    await page.context.close()

    bobs = await signed_in_page(application, base, browser, bob.id)
    assert await bobs.locator("a[href='/owner']").count() == 0
    answer = await bobs.goto(f"{base}/memory/message/{anns.message_id}")
    assert answer is not None and answer.status == 404
    await shot(bobs, "not-yours")
    answer = await bobs.goto(f"{base}/owner")
    assert answer is not None and answer.status == 404
    # A form post without the CSRF token (what another site could forge) is refused.
    forged = await bobs.request.post(f"{base}/facts", form={"text": "forged"})
    assert forged.status == 403
    assert await application.web.service.facts.facts(bob) == []
    await bobs.context.close()


async def test_a_person_renames_marks_and_deletes_places(
    served: tuple[App, str], browser: Any
) -> None:
    application, base = served
    ann = await add_user(application, "ann", name="Ann")
    assert ann.id is not None
    gym = await application.location.add_place(ann.id, "gym", 52.5150, 13.3800)
    home = await application.location.add_place(ann.id, "home", 52.5200, 13.4050)
    page = await signed_in_page(application, base, browser, ann.id)
    await go(page, "Places")
    await page.wait_for_url(f"{base}/places")
    await page.fill(f"#place-{gym.id} input[name=name]", "climbing gym")
    await page.click(f"#place-{gym.id} button:has-text('Rename')")
    assert "Saved: climbing gym" in await page.inner_text(".note")
    await page.click(f"#place-{home.id} button:has-text('Home-like')")
    await page.wait_for_selector(".note")
    assert "(home-like)" in await page.inner_text(f"#place-{home.id}")
    await shot(page, "places")
    await confirm(page, f"#place-{gym.id}", "Delete")
    await page.wait_for_selector(".note")
    assert await page.locator(f"#place-{gym.id}").count() == 0
    names = [p.name for p in await application.location.places(ann.id)]
    kinds = [p.kind for p in await application.location.places(ann.id)]
    assert names == ["home"] and kinds == ["home"]


async def test_a_person_adds_a_calendar_feed_and_removes_it_with_its_events(
    app_factory: AppFactory, fake_llm: FakeLLM, browser: Any
) -> None:
    tomorrow = datetime.now(UTC).replace(hour=17, minute=0) + timedelta(days=1)
    feed = FakeFeed(ics_body(("club@t", f"{tomorrow:%Y%m%dT%H%M%S}", "Climbing with Ana")))
    await feed.start()
    try:
        # The fake feed is on loopback, which only this setting lets lifebot fetch.
        application = await app_factory(fake_llm, web_port=0, calendar_allow_private=True)
        await application.web.start()
        base = f"http://127.0.0.1:{application.web.server.bound_port}"
        ann = await add_user(application, "ann", name="Ann")
        assert ann.id is not None
        page = await signed_in_page(application, base, browser, ann.id)
        await go(page, "Your calendars")
        await page.wait_for_url(f"{base}/calendars")
        assert "no calendars linked yet" in await page.inner_text("main")
        await page.fill("input[name=url]", f"{feed.url}?key=hunter2hunter2")
        await page.fill("input[name=name]", "Climbing club")
        await page.click("button:has-text('Add calendar')")
        assert "Subscribed to Climbing club" in await page.inner_text(".note")
        card = await page.inner_text("ul.cards li")
        assert "Climbing club" in card and "1 event(s)" in card and "?key=…" in card
        assert "hunter2" not in await page.content()
        await shot(page, "calendars")
        await go(page, "Calendar")
        assert "Climbing with Ana" in await page.inner_text("main")

        await page.goto(f"{base}/calendars")
        await confirm(page, "ul.cards li", "Remove")
        assert "Removed Climbing club and its 1 event(s)" in await page.inner_text(".note")
        assert await page.locator("ul.cards li").count() == 0
        await page.goto(f"{base}/calendar")
        assert "Climbing with Ana" not in await page.inner_text("main")
        await page.context.close()
    finally:
        await feed.stop()


async def test_a_person_uploads_a_pdf_and_finds_it_in_memory(
    served: tuple[App, str], browser: Any, tmp_path: Path
) -> None:
    application, base = served
    ann = await add_user(application, "ann", name="Ann")
    assert ann.id is not None
    lease = tmp_path / "lease.pdf"
    lease.write_bytes(pdf("Flat lease of Ann", "The monthly rent is 950 EUR"))
    page = await signed_in_page(application, base, browser, ann.id)
    await go(page, "Upload")
    await page.wait_for_url(f"{base}/upload")
    await page.set_input_files("#upload-file", str(lease))
    await page.click("#upload-send")
    await page.wait_for_url(f"{base}/upload?message=*")
    assert "I read lease.pdf (2 pages)" in await page.inner_text(".note")
    assert "lease.pdf: 2 pages, now searchable" in await page.inner_text("#uploaded")
    await shot(page, "upload")
    await page.goto(f"{base}/memory")
    await page.fill("input[name=q]", "monthly rent")
    await page.click("button:has-text('Search')")
    assert "950 EUR" in await page.inner_text("ol.hits")
    await page.context.close()
