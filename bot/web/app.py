"""The FastAPI application: pages, /api/v1, health, static files and security headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from bot.web import (
    api,
    calendars,
    chat_routes,
    contacts,
    health,
    ingest,
    location,
    omi,
    owner,
    pages,
    places,
    public,
    upload_routes,
)
from bot.web.deps import NeedsSignIn, WebContext, page_csp

STATIC = Path(__file__).parent / "static"

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": page_csp(),  # a page with a script of ours sets its own
}


def create_app(context: WebContext) -> FastAPI:
    """The web app over ``context`` (no I/O until it serves a request)."""
    app = FastAPI(
        title="lifebot",
        summary="Your memory, reminders, calendar, devices and settings.",
        version="1",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.web = context
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

    @app.exception_handler(NeedsSignIn)
    async def to_signin(_request: Request, _exc: NeedsSignIn) -> Response:
        return RedirectResponse("/signin", status_code=303)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if request.url.path.startswith(("/api/", "/omi/")):
            return JSONResponse(
                {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
            )
        detail = "Not found." if exc.status_code == 404 else str(exc.detail)
        html = context.templates.get_template("error.html").render(
            status=exc.status_code, detail=detail
        )
        return HTMLResponse(html, status_code=exc.status_code)

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        if not request.url.path.startswith("/api/docs"):
            for key, value in _HEADERS.items():
                response.headers.setdefault(key, value)
        return response

    return app
