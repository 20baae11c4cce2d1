"""The owner answers pairing requests on the web page: an approved stranger becomes a user and
is welcomed exactly once; a refused one is closed; another user's page offers neither."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import select

from bot.app.build import App
from storage.models import Delivery, PairingRequest
from storage.repos.pairing import PairingRepo
from tests.support.app import add_user
from tests.support.web import client_for, csrf_of, sign_in


async def _request(app: App, code: str, sender: str, name: str) -> None:
    now = app.clock.now()
    async with app.db.session() as s:
        await PairingRepo(s).add(
            PairingRequest(
                code=code,
                channel="fake",
                account="acct",
                sender_id=sender,
                chat_id=sender,
                display_name=name,
                created_at=now,
                expires_at=now + timedelta(hours=1),
            )
        )


async def test_the_owner_approves_once_and_refuses_on_the_page(app: App) -> None:
    ann = await add_user(app, "ann", owner=True, name="Ann")
    await _request(app, "KX7P2QRM", "carol", "Carol")
    await _request(app, "ZZ4Q9WEB", "dave", "Dave")
    async with client_for(app) as web:
        csrf = await sign_in(app, web, ann)
        page = await web.get("/owner")
        assert "Carol" in page.text and "Dave" in page.text
        yes = await web.post("/owner/pairing/KX7P2QRM/approve", data={"csrf": csrf})
        assert yes.status_code in (302, 303)
        again = await web.post("/owner/pairing/KX7P2QRM/approve", data={"csrf": csrf})
        assert again.status_code in (302, 303)
        no = await web.post("/owner/pairing/ZZ4Q9WEB/refuse", data={"csrf": csrf})
        assert no.status_code in (302, 303)
        after = await web.get("/owner")
        csrf_of(after.text)  # still a page of its own
    users = {row.user.display_name for row in await app.web.service.owner.users()}
    assert "Carol" in users and "Dave" not in users
    assert await app.web.service.owner.pairings() == []
    async with app.db.session() as s:
        welcomes = list(
            (await s.exec(select(Delivery).where(Delivery.key == "welcome:KX7P2QRM"))).all()
        )
    assert len(welcomes) == 1 and "approved" in str(welcomes[0].payload)
