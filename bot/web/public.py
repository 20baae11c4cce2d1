"""Routes reached without a session: the sign-in page, one-time links and the calendar feed.

A sign-in link opens a page with one button; only pressing it (a POST) spends the link, so a
chat app fetching a preview of the link does not sign anyone in. The POST is taken only from
that page: same origin, and a token bound to the page's own nonce cookie, so another site
cannot sign a visitor in as someone else (login CSRF).
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
from datetime import timedelta
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.clock import zone
from bot.jobs.calendars.events import to_ics
from bot.web.auth import LINK_TTL
from bot.web.deps import COOKIE, ctx

log = logging.getLogger(__name__)
router = APIRouter()
LOGIN_COOKIE = "lifebot_login"
"""The sign-in page's nonce (path ``/login`` only, SameSite=Strict)."""
_NONCE = re.compile(r"[A-Za-z0-9_\-]{32}")


@router.get("/signin", response_class=HTMLResponse)
async def signin(request: Request) -> HTMLResponse:
    """How to sign in: send /web to lifebot in a private chat."""
    return ctx(request).templates.TemplateResponse(
        request,
        "signin.html",
        {"out": "out" in request.query_params, "deleted": "deleted" in request.query_params},
    )


@router.get("/login/{secret}", response_class=HTMLResponse)
async def login_page(request: Request, secret: str) -> HTMLResponse:
    """The confirmation page of a sign-in link (spends nothing).

    It sets a random nonce in a cookie only this path sees (SameSite=Strict) and puts a token
    bound to the nonce and the link into its form: only this page, in this browser, can post
    the link back (login CSRF, issue 29).
    """
    c = ctx(request)
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    if not _NONCE.fullmatch(nonce):
        nonce = secrets.token_urlsafe(24)
    token = await c.auth.page_token(nonce, secret)
    response = c.templates.TemplateResponse(
        request, "login.html", {"secret": secret, "token": token, "failed": None}
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=int(LINK_TTL.total_seconds()),
        httponly=True,
        samesite="strict",
        secure=c.secure_cookies,
        path="/login",
    )
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def same_origin(request: Request, public_url: str) -> bool:
    """The post came from one of our own pages, as far as the browser tells.

    Browsers name the page's origin in ``Origin`` on a POST, and say where it came from in
    ``Sec-Fetch-Site``. The sign-in page sends no referrer, so its own post says ``Origin:
    null``: then ``Sec-Fetch-Site`` decides. A client that sends neither is no browser and
    still needs the page's token.
    """
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        host = urlsplit(origin).netloc.lower()
        ours = {request.headers.get("host", "").lower(), urlsplit(public_url).netloc.lower()}
        return host in ours
    fetch_site = request.headers.get("sec-fetch-site")
    return fetch_site is None or fetch_site == "same-origin"


@router.post("/login", response_model=None)
async def login(request: Request) -> Response:
    """Spend the link and set the session cookie (only from the link's own page)."""
    c = ctx(request)
    form = await request.form()
    secret, token = form.get("secret"), form.get("token")
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    genuine = (
        isinstance(secret, str)
        and isinstance(token, str)
        and bool(_NONCE.fullmatch(nonce))
        and same_origin(request, c.auth.base_url)
        and hmac.compare_digest(token, await c.auth.page_token(nonce, secret))
    )
    if not genuine:
        log.warning("refused a sign-in post that did not come from the link's own page")
        return c.templates.TemplateResponse(
            request, "login.html", {"secret": "", "failed": "forged"}, status_code=403
        )
    assert isinstance(secret, str)
    signed = await c.auth.sign_in(secret)
    if signed is None:
        return c.templates.TemplateResponse(
            request, "login.html", {"secret": "", "failed": "spent"}, status_code=400
        )
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        COOKIE,
        signed.cookie,
        max_age=int(c.auth.session_ttl / timedelta(seconds=1)),
        httponly=True,
        samesite="lax",
        secure=c.secure_cookies,
        path="/",
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@router.get("/calendar/{secret}.ics")
@router.head("/calendar/{secret}.ics", include_in_schema=False)
async def calendar_feed(request: Request, secret: str) -> Response:
    """The user's events as iCalendar, for phone calendar subscriptions.

    Calendar apps poll it: HEAD is answered too, and the answer may be kept by the app (not by
    shared caches: the address is a secret) for a few minutes.
    """
    c = ctx(request)
    user_id = await c.auth.ics_user(secret)
    user = await c.service.accounts.user(user_id) if user_id is not None else None
    if user is None:
        raise HTTPException(404)
    events = await c.service.calendar.published_events(user)
    body = to_ics(events, name="lifebot", now=c.service.clock.now(), tz=zone(user.timezone))
    return Response(
        body,
        media_type="text/calendar; charset=utf-8",
        headers={"Cache-Control": "private, max-age=300"},
    )
