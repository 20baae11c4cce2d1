"""Helpers for the web tests: seeded users and data, signed-in httpx clients."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import timedelta

import httpx

from bot.app.build import App
from bot.messages import Address
from storage.models import Proposal, User
from storage.repos.calendar import CalendarRepo
from storage.repos.facts import FactRepo
from storage.repos.messages import ConversationRepo, MessageRepo

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token in a page's forms."""
    m = _CSRF.search(html)
    assert m is not None, "no form with a CSRF token on this page"
    return m.group(1)


def client_for(application: App) -> httpx.AsyncClient:
    """An httpx client talking to the app's ASGI web app (no socket)."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application.web.app), base_url="http://lifebot.test"
    )


_SAID = re.compile(
    r'<(?:div|p) class="(note|error)" role="(?:status|alert)">(?:<p>)?(.*?)</p>', re.DOTALL
)


async def said(client: httpx.AsyncClient, posted: httpx.Response) -> str:
    """What a form post said, as the page it redirects to shows it: ``note=...`` or
    ``error=...`` (unescaped). The redirect itself must carry none of it."""
    assert posted.status_code == 303, posted.text
    where = posted.headers["location"]
    assert "note=" not in where and "error=" not in where, where
    page = await client.get(where)
    found = _SAID.search(page.text)
    return f"{found.group(1)}={html.unescape(found.group(2))}" if found else ""


async def login_form(client: httpx.AsyncClient, secret: str) -> dict[str, str]:
    """Open a sign-in link's page in ``client``: the form its Sign in button posts."""
    page = await client.get(f"/login/{secret}")
    assert page.status_code == 200
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    assert token is not None, "the sign-in page carries no token"
    return {"secret": secret, "token": token.group(1)}


async def sign_in(application: App, client: httpx.AsyncClient, user: User) -> str:
    """Sign ``client`` in as ``user`` through a one-time link; returns the CSRF token."""
    assert user.id is not None
    url = await application.web.auth.issue_link(user.id)
    secret = url.rsplit("/", 1)[1]
    done = await client.post("/login", data=await login_form(client, secret))
    assert done.status_code == 303, done.text
    today = await client.get("/")
    assert today.status_code == 200
    return csrf_of(today.text)


@dataclass
class Seeded:
    """One user's data, by id."""

    fact_id: int
    message_id: int
    proposal_id: int


async def seed(application: App, user: User, words: str) -> Seeded:
    """A conversation turn, a fact learned from it, and a proposed event for ``user``."""
    assert user.id is not None
    now = application.clock.now()
    async with application.db.session() as s:
        conv = await ConversationRepo(s).get_or_create(
            user.id, Address("fake", "acct", f"chat-{user.id}")
        )
        assert conv.id is not None
        msg = await MessageRepo(s).add(
            user.id,
            conv.id,
            role="user",
            text=words,
            direction="in",
            channel="fake",
            chat_id=f"chat-{user.id}",
            status="answered",
        )
        assert msg.id is not None
        fact, _ = await FactRepo(s).add(user.id, words, source_message_ids=[msg.id])
        prop = await CalendarRepo(s).add_proposal(
            Proposal(
                user_id=user.id,
                title=f"Dinner of {user.display_name}",
                start_at=now + timedelta(days=1),
                end_at=now + timedelta(days=1, hours=2),
                expires_at=now + timedelta(days=3),
                created_at=now,
            )
        )
    assert fact.id is not None and prop.id is not None
    await application.memory.index_pending(user.id)
    return Seeded(fact.id, msg.id, prop.id)
