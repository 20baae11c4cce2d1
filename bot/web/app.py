"""The FastAPI application: pages, /api/v1, health, static files and security headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from bot.feature import Access
from bot.web import (
    api,
    api_docs,
    calendars,
    chat_routes,
    contacts,
    health,
    ingest,
    location,
    omi,
    openapi,
    owner,
    pages,
    places,
    problems,
    public,
    upload_routes,
)
from bot.web.deps import WebContext, bearer_check, owner_check, page_csp, session_check
from bot.web.gate import RequestGate
from bot.web.limits import RequestOptions

STATIC = Path(__file__).parent / "static"
API_DESCRIPTION = (
    "Everything lifebot keeps for you, as JSON. Send a personal API token as "
    "`Authorization: Bearer lbk_...` (make one on the Settings page; read-only unless made "
    "with the write scope). Lists are pages: `?limit=` (1-200) and `?cursor=` (the `next` of "
    "the page before). 201 means something was created (its id is in the answer), 200 that "
    "it was there already; 409 a name already taken or a proposal answered already or "
    "expired. Every error is RFC 9457 problem "
    "details (`application/problem+json`)."
)

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": page_csp(),  # a page with a script of ours sets its own
}


def create_app(context: WebContext, options: RequestOptions) -> FastAPI:
    """The web app over ``context``, every request through the request layer (no I/O yet)."""
    app = FastAPI(
        title="lifebot",
        summary="Your memory, reminders, calendar, devices and settings.",
        description=API_DESCRIPTION,
        version="1",
        docs_url=None,  # bot/web/api_docs.py serves the reference, offline
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.web = context
    openapi.install(app)  # the document describes /api/v1 only, its security and its errors
    app.include_router(api_docs.router)
    app.include_router(health.router)
    app.include_router(public.router)
    app.include_router(api.router)
    app.include_router(ingest.router)
    app.include_router(ingest.omi_router)
    app.include_router(location.router)
    app.include_router(places.api_router)
    app.include_router(places.router)
    app.include_router(contacts.api_router)
    app.include_router(contacts.router)
    app.include_router(calendars.api_router)
    app.include_router(calendars.router)
    app.include_router(omi.router)
    app.include_router(upload_routes.api_router)
    app.include_router(upload_routes.router)
    app.include_router(owner.router)
    app.include_router(chat_routes.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        # Browsers ask for it at the root whatever the page says.
        return FileResponse(STATIC / "favicon.ico", headers={"Cache-Control": "max-age=86400"})

    problems.install(app, context.templates)
    app.add_middleware(
        RequestGate,
        routes_of=lambda: app.routes,
        options=options,
        checks={
            Access.SESSION: session_check,
            Access.OWNER: owner_check,
            Access.BEARER: bearer_check,
        },
        # Routes whose token is their own: checked before their body is read too.
        token_checks={
            "/omi": omi.token_check,
            "/omi/{token}/conversation": omi.token_check,
            "/api/location": location.phone_check,
        },
        refuse=lambda request, exc: problems.refusal(request, context.templates, exc),
    )

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for key, value in _HEADERS.items():  # a page with a CSP of its own keeps it
            response.headers.setdefault(key, value)
        return response

    return app
