"""Routes reached without a session: the sign-in page, one-time links and the calendar feed.

A sign-in link opens a page with one button; only pressing it (a POST) spends the link, so a
chat app fetching a preview of the link does not sign anyone in.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.clock import zone
from bot.jobs.calendar import to_ics
from bot.web.deps import COOKIE, ctx

router = APIRouter()


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
    """The confirmation page of a sign-in link (spends nothing)."""
    response = ctx(request).templates.TemplateResponse(
        request, "login.html", {"secret": secret, "failed": False}
    )
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/login", response_model=None)
async def login(request: Request) -> Response:
    """Spend the link and set the session cookie."""
    c = ctx(request)
    form = await request.form()
    secret = form.get("secret")
    signed = await c.auth.sign_in(secret) if isinstance(secret, str) else None
    if signed is None:
        return c.templates.TemplateResponse(
            request, "login.html", {"secret": "", "failed": True}, status_code=400
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
    return response


@router.get("/calendar/{secret}.ics")
async def calendar_feed(request: Request, secret: str) -> Response:
    """The user's events as iCalendar, for phone calendar subscriptions."""
    c = ctx(request)
    user_id = await c.auth.ics_user(secret)
    user = await c.service.user(user_id) if user_id is not None else None
    if user is None:
        raise HTTPException(404)
    events = await c.service.all_events(user)
    body = to_ics(events, name="lifebot", now=c.service.clock.now(), tz=zone(user.timezone))
    return Response(body, media_type="text/calendar; charset=utf-8")
