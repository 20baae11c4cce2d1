"""``/api/docs``: the REST API's reference, readable offline (issue 31).

Swagger UI's own files come from the ``swagger-ui-py`` package (Swagger UI is Apache-2.0;
the package ships its licence beside them) and are served from lifebot itself, with a small
starter script of lifebot's own (``/static/api-docs.js``), under a CSP that allows nothing
from another host: the page works with no internet, and reads ``/api/openapi.json``. The
spec validator badge (which would call validator.swagger.io) is off.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse

from bot.web.deps import ctx

router = APIRouter(prefix="/api/docs", include_in_schema=False)


def _assets() -> Path:
    """The package's ``static`` folder, found without importing it.

    Importing ``swagger_ui`` loads its own web-framework glue and YAML, about a tenth of a
    second that every ``serve`` start with the web page paid for two files served later.
    """
    spec = find_spec("swagger_ui")
    folders = list(spec.submodule_search_locations or []) if spec else []
    if not folders:
        raise ModuleNotFoundError("swagger-ui-py is not installed", name="swagger_ui")
    return Path(folders[0]) / "static"


ASSETS = _assets()
"""Where the installed package keeps Swagger UI's files."""
SERVED = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
}
"""The only files of it lifebot serves."""
DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'; "
    "form-action 'self'; base-uri 'none'; object-src 'none'"
)
"""Nothing from another host, nothing inline: scripts are Swagger UI's bundle and lifebot's
starter, styles its stylesheet (React sets the rest through the DOM, which CSP allows)."""


@router.get("", response_class=HTMLResponse)
async def docs(request: Request) -> HTMLResponse:
    """The API reference page."""
    html = ctx(request).templates.get_template("api_docs.html").render()
    return HTMLResponse(html, headers={"Content-Security-Policy": DOCS_CSP})


@router.get("/{name}")
async def asset(name: str) -> FileResponse:
    """One of Swagger UI's two files."""
    media = SERVED.get(name)
    if media is None:
        raise HTTPException(404, "Not found.")
    return FileResponse(
        ASSETS / name, media_type=media, headers={"Cache-Control": "public, max-age=86400"}
    )
