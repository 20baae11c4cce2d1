"""One error shape for every HTTP answer that is not a success (issue 28, issue 31).

Programs (``/api/``, ``/omi/``) get RFC 9457 problem details: ``application/problem+json``
with ``type``, ``title``, ``status`` and ``detail`` (``type`` is ``about:blank``, so ``title``
is the status's own phrase and ``detail`` says in plain words what went wrong and what to
do). A refused parameter adds an ``errors`` list naming each one. People on pages get the
plain error page instead. Both come from here, whether a route, FastAPI's validation or the
request layer (``bot.web.gate``) refused the request, so no path answers in a shape of its
own, and nothing ever answers with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException

from bot.web.deps import NeedsSignIn, Refused

log = logging.getLogger(__name__)

MACHINE_PREFIXES = ("/api/", "/omi/", "/mcp")
"""Paths called by programs (the API, phone apps, Omi's backend, MCP clients): they get
problem details."""
PROBLEM_TYPE = "application/problem+json"


def for_programs(path: str, accept: str = "") -> bool:
    """True for programs: an API path, or a caller asking for JSON (the chat page's script)."""
    return path.startswith(MACHINE_PREFIXES) or ("json" in accept and "text/html" not in accept)


_PHRASES = {413: "Content Too Large", 422: "Unprocessable Content"}  # RFC 9110's names


def title_of(status: int) -> str:
    """The status's own phrase (``Not Found``), the title an ``about:blank`` problem carries."""
    if status in _PHRASES:
        return _PHRASES[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem(
    status: int,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    errors: Sequence[Mapping[str, Any]] | None = None,
    members: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An RFC 9457 problem details answer (``members``: extension members)."""
    body: dict[str, Any] = {
        **(members or {}),
        "type": "about:blank",
        "title": title_of(status),
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = list(errors)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_TYPE)


def error_page(
    templates: Jinja2Templates,
    status: int,
    detail: str,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """The plain error page people see."""
    shown = "Not found." if status == 404 else detail
    html = templates.get_template("error.html").render(status=status, detail=shown)
    return HTMLResponse(html, status_code=status, headers=headers)


def answer(
    request: Request,
    templates: Jinja2Templates,
    status: int,
    detail: str,
    headers: Mapping[str, str] | None = None,
    errors: Sequence[Mapping[str, Any]] | None = None,
    members: Mapping[str, str] | None = None,
) -> Response:
    """Problem details for programs, the error page for people."""
    if for_programs(request.url.path, request.headers.get("accept", "")):
        return problem(status, detail, headers=headers, errors=errors, members=members)
    return error_page(templates, status, detail, headers)


def refusal(request: Request, templates: Jinja2Templates, exc: Exception) -> Response:
    """The answer to a refusal raised by a route, a dependency or the request layer."""
    if isinstance(exc, NeedsSignIn):
        return RedirectResponse("/signin", status_code=303)
    if isinstance(exc, HTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else title_of(exc.status_code)
        members = exc.members if isinstance(exc, Refused) else None
        return answer(request, templates, exc.status_code, detail, exc.headers, members=members)
    raise TypeError(f"not a refusal: {exc!r}")


def _where(loc: Sequence[Any]) -> str:
    # ("path", "fact_id") -> "fact_id"; ("body", "items", 0, "name") -> "items.0.name"
    parts = [str(p) for p in loc[1:]] if len(loc) > 1 else [str(p) for p in loc]
    return ".".join(parts) or "the request"


_PROBLEMS = {
    "json_invalid": "not valid JSON",
    "extra_forbidden": "not a field this takes (check its spelling; /api/docs lists them)",
}
"""Pydantic's words for these, replaced: its location of a JSON error is a character offset
(``12: JSON decode error``), and "Extra inputs are not permitted" does not say what to do."""


def _error(e: Mapping[str, Any]) -> dict[str, str]:
    loc = e.get("loc", ())
    where = str(loc[0]) if loc else "body"
    if e.get("type") == "json_invalid":
        return {"in": where, "name": "body", "problem": _PROBLEMS["json_invalid"]}
    problem = _PROBLEMS.get(str(e.get("type")), str(e.get("msg", "not valid")))
    return {"in": where, "name": _where(loc), "problem": problem}


def validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """Each refused parameter: where it is and why (never the value sent: it may be a secret)."""
    return [_error(e) for e in exc.errors()]


def install(app: FastAPI, templates: Jinja2Templates) -> None:
    """Answer every refusal and every unexpected error of ``app`` in the shared shape."""

    @app.exception_handler(NeedsSignIn)
    async def to_signin(request: Request, exc: NeedsSignIn) -> Response:
        return refusal(request, templates, exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return refusal(request, templates, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = validation_errors(exc)
        programs = for_programs(request.url.path, request.headers.get("accept", ""))
        if not programs and any(e["in"] == "path" for e in errors):
            return error_page(templates, 404, "Not found.")  # a page address naming nothing
        words = "; ".join(f"{e['name']}: {e['problem']}" for e in errors)
        return answer(request, templates, 422, f"Not accepted: {words}.", errors=errors)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, _exc: Exception) -> Response:
        # Starlette logs the exception itself after this answer (through lifebot's handlers).
        return answer(
            request,
            templates,
            500,
            "Something went wrong inside lifebot; the error is in its log. Try again in a moment.",
        )
