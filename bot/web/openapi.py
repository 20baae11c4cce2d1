"""The OpenAPI document of the REST API, ``/api/openapi.json`` (issue 31).

FastAPI describes every route it serves; a developer needs the API only. This keeps the
``/api/v1`` paths (pages, form posts, health checks and the phone apps' webhooks are left
out, with every schema only they used), puts the bearer scheme on every operation, and
gives each operation the errors it can answer, all in the one shape (RFC 9457 problem
details, ``bot.web.problems``):

- 401 every operation (no token, or one revoked); 403 every one that changes something (a
  read-only token); 404 every one with an id in its path; 422 every one that takes
  parameters or a body; 400 every list (a cursor lifebot did not make for it);
- 409, 413, 415 and 503 where a route says it answers them (``responses=`` on the route).

No API route is rate limited, so none answers 429; a route that starts to must say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from bot.web.problems import PROBLEM_TYPE

API_PREFIX = "/api/v1/"
SCHEME = "bearer"
"""The security scheme's name in the document."""

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details: what went wrong, in words.",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "Always about:blank."},
        "title": {"type": "string", "description": "The status's own phrase (Not Found)."},
        "status": {"type": "integer", "description": "The HTTP status."},
        "detail": {"type": "string", "description": "What went wrong and what to do, in words."},
        "errors": {
            "type": "array",
            "description": "Each refused parameter (422 only).",
            "items": {
                "type": "object",
                "properties": {
                    "in": {"type": "string", "description": "path, query or body"},
                    "name": {"type": "string"},
                    "problem": {"type": "string"},
                },
            },
        },
    },
}

DEFAULT_WORDS = {
    "400": "The cursor is not one lifebot made for this list (changed, another list's, or "
    "more than a day old): start again without it.",
    "401": "No valid personal API token: send `Authorization: Bearer lbk_...`.",
    "403": "The token is read-only, and this changes something.",
    "404": "Nothing of yours has this id.",
    "422": "A parameter or the body is not accepted; `errors` names each.",
}
WRITES = frozenset({"post", "put", "patch", "delete"})


def _operations(paths: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in paths.items():
        for method, op in item.items():
            if method in {"get", "put", "post", "patch", "delete", "head", "options"}:
                yield path, method, op


def _errors_of(path: str, method: str, op: dict[str, Any]) -> set[str]:
    params = {p.get("name") for p in op.get("parameters", [])}
    codes = {"401"}
    if method in WRITES:
        codes.add("403")
    if "{" in path:
        codes.add("404")
    if params or "requestBody" in op:
        codes.add("422")
    if "cursor" in params:
        codes.add("400")
    return codes


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _used_schemas(paths: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """The schemas ``paths`` refer to, directly or through other schemas."""
    seen: set[str] = set()
    todo = list(_refs(paths))
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(_refs(schemas[name]))
    return {name: schemas[name] for name in sorted(seen)}


def api_document(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``/api/v1`` only, with its security and its errors."""
    full = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    paths = {p: item for p, item in full.get("paths", {}).items() if p.startswith(API_PREFIX)}
    problem = {"$ref": "#/components/schemas/Problem"}
    for path, method, op in _operations(paths):
        op["security"] = [{SCHEME: []}]
        responses: dict[str, Any] = op.setdefault("responses", {})
        for code in _errors_of(path, method, op):
            responses.setdefault(code, {"description": DEFAULT_WORDS[code]})
        for code, answer in responses.items():
            if re.fullmatch(r"[45]\d\d", code):
                if answer.get("description") in (None, "", "Validation Error"):
                    answer["description"] = DEFAULT_WORDS.get(code, "Refused.")
                answer["content"] = {PROBLEM_TYPE: {"schema": problem}}
    schemas = dict(full.get("components", {}).get("schemas", {}))
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Problem"] = PROBLEM_SCHEMA
    return {
        **{k: v for k, v in full.items() if k not in ("paths", "components")},
        "paths": paths,
        "components": {
            "schemas": _used_schemas(paths, schemas),
            "securitySchemes": {
                SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A personal API token (`lbk_...`): make one on the "
                    "Settings page. Read-only unless made with the write scope.",
                }
            },
        },
        "security": [{SCHEME: []}],
    }


def install(app: FastAPI) -> None:
    """Serve ``api_document`` (made once, at the first request) as the app's OpenAPI."""

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = api_document(app)
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]  # FastAPI's documented override
