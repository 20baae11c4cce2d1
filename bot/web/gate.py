"""The request layer: every HTTP request passes here before its route sees it (issue 28).

For the route a request is for, found in the features' declarations (``bot.feature.Route``):

1. **Who may call it** is checked before a byte of the body is read: a browser session
   (``SESSION``, ``OWNER``), a personal API token (``BEARER``), or the feature's own token
   check (``HEADER_TOKEN``, ``PATH_TOKEN``: Omi's device token, a phone's location token). The
   routes' own dependencies find the caller already checked (``bot.web.deps`` keeps it on the
   request), so nothing is checked twice.
2. **The body is capped**: a declared length over the route's ``max_body`` (or the setting
   it names, plus room for a multipart envelope) is refused before anything is received; a
   body sent in chunks is counted as the route reads it and refused the moment it passes.
3. **JSON is refused when nested deeper than ``max_json_depth``**: Python's parser recurses,
   and a body of 100,000 ``[`` would otherwise end in a RecursionError (a 500).

Refusals are ``HTTPException``s answered in the shared shape (``bot.web.problems``); a
refusal raised while a route reads its body reaches the same handlers. Every request is
counted by route template, method and status (``lifebot_http_requests_total``).
"""

from __future__ import annotations

import logging
import re
import time
from array import array
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate

from fastapi import Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.feature import Access, Route
from bot.metrics import Counter, Histogram
from bot.web.deps import NeedsSignIn
from bot.web.limits import RequestOptions

log = logging.getLogger(__name__)

REQUESTS = Counter(
    "lifebot_http_requests_total",
    "HTTP requests answered, by route template, method and status.",
    ("route", "method", "status"),
)
SECONDS = Histogram(
    "lifebot_http_request_seconds",
    "Seconds from a request's arrival to the end of its answer, by route template.",
    ("route",),
)
REFUSED = Counter(
    "lifebot_http_refused_total",
    "Requests the request layer refused, by reason (signin, too_large, json_depth, length).",
    ("reason",),
)

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""Methods whose requests may carry a body."""

Check = Callable[[Request, Mapping[str, str]], Awaitable[None]]
"""Authenticates a request from its headers and path parameters; raises the refusal
(``HTTPException``, or ``NeedsSignIn`` for pages) and keeps who it found on the request."""
Refuse = Callable[[Request, Exception], Response]
"""Turns a refusal into the answer (``bot.web.problems.refusal``)."""


@dataclass(frozen=True, slots=True)
class Served:
    """One route the app serves, as the request layer matches it."""

    template: str
    """Its path template (``/api/v1/facts/{fact_id}``)."""
    methods: frozenset[str]
    """The methods it answers (empty: every method, a mounted app)."""
    regex: re.Pattern[str]
    route: object = field(compare=False, repr=False)
    """The route itself (a FastAPI route's ``dependant`` names its parameters)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What the request layer enforces on one served route."""

    served: Served
    declared: Route
    max_body: int
    file_limit: int | None
    """The operator's file size limit, when the route takes uploads (``image_max_bytes``)."""
    check: Check | None
    """The access check (None: public, or a token the route checks itself)."""


def served_routes(routes: Iterable[BaseRoute]) -> list[Served]:
    """Every route ``routes`` serve, in matching order, with included routers opened up."""
    found: list[Served] = []
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:  # FastAPI keeps an included router as one route
            found.extend(served_routes(contexts()))
            continue
        path = getattr(route, "path", None)
        if path is None:
            continue
        regex = getattr(route, "path_regex", None)
        if regex is None:
            regex = getattr(getattr(route, "starlette_route", None), "path_regex", None)
        if regex is None:
            regex = compile_path(path)[0]
        methods = frozenset(getattr(route, "methods", None) or ())
        found.append(Served(str(path), methods, regex, route))
    return found


class BodyRefused(HTTPException):
    """A body the request layer will not take (raised from the body's reads)."""


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def too_large(rule: Rule, size: int | None) -> BodyRefused:
    """The refusal of a body over ``rule``'s cap (``size``: its declared length, if any)."""
    REFUSED.inc("too_large")
    if rule.file_limit is not None:  # an upload: say it about the file, in the chat's words
        said = f"{_mb(size)}; " if size is not None else ""
        return BodyRefused(
            413,
            f"That file is too big for me ({said}I keep files up to {_mb(rule.file_limit)}). "
            "Please send a smaller one. I kept nothing.",
        )
    return BodyRefused(
        413, f"The body is larger than the {_mb(rule.max_body)} this address takes; not read."
    )


_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_AS_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def json_depth(raw: bytes) -> int:
    """How deeply ``raw`` nests arrays and objects (brackets inside strings are skipped).

    Linear and without recursion: strings are cut out, each bracket becomes +1 or -1, and
    the deepest running sum is the depth. Used on bodies that may not even be valid JSON.
    """
    steps = _STRING.sub(b"", raw).translate(_AS_STEP, _NOT_BRACKET)
    return max(accumulate(array("b", steps)), default=0)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media.endswith(("/json", "+json"))


class _Body:
    """The request's ``receive``, counting and checking the body as the route reads it."""

    def __init__(self, receive: Receive, rule: Rule, depth: int | None) -> None:
        self._receive = receive
        self.rule = rule
        self.depth = depth
        """Check JSON nesting up to this (None: not a JSON body)."""
        self.size = 0
        self._parts: list[bytes] = []

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] != "http.request":
            return message
        chunk = message.get("body", b"")
        self.size += len(chunk)
        if self.size > self.rule.max_body:
            raise too_large(self.rule, None)
        if self.depth is not None:
            self._parts.append(chunk)
            if not message.get("more_body", False):
                raw, self._parts = b"".join(self._parts), []
                if json_depth(raw) > self.depth:
                    REFUSED.inc("json_depth")
                    raise BodyRefused(
                        400, f"The JSON is nested deeper than {self.depth} levels; not read."
                    )
        return message


class RequestGate:
    """ASGI middleware: the request layer in front of every route of ``routes_of()``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes_of: Callable[[], Iterable[BaseRoute]],
        options: RequestOptions,
        checks: Mapping[Access, Check],
        token_checks: Mapping[str, Check],
        refuse: Refuse,
    ) -> None:
        self.app = app
        self._routes_of = routes_of
        self.options = options
        self.checks = checks
        """The check of each access kind that is the same for every route (sessions, API
        tokens)."""
        self.token_checks = token_checks
        """Each token-carrying route's own check, by its declared prefix (``/omi``)."""
        self.refuse = refuse
        self._rules: list[Rule] | None = None

    def rules(self) -> list[Rule]:
        """What is enforced on each served route (made at the first request)."""
        if self._rules is None:
            rules = []
            for served in served_routes(self._routes_of()):
                declared = self.options.registry.route_for(served.template)
                if declared is None:  # the contract tests fail on this; stay strict here
                    log.warning("route %s is declared by no feature", served.template)
                    declared = Route(served.template, Access.PUBLIC, max_body=0)
                check = self.checks.get(declared.access) or self.token_checks.get(declared.prefix)
                rules.append(
                    Rule(
                        served,
                        declared,
                        self.options.max_body(declared),
                        self.options.file_limit(declared),
                        check,
                    )
                )
            self._rules = rules
        return self._rules

    def match(self, method: str, path: str) -> tuple[Rule, dict[str, str]] | None:
        """The rule of the route a request goes to, and its path parameters."""
        partial = None
        for rule in self.rules():
            found = rule.served.regex.match(path)
            if found is None:
                continue
            if not rule.served.methods or method in rule.served.methods:
                return rule, found.groupdict()
            partial = partial or (rule, found.groupdict())
        return partial  # the router answers 405; the body limits still hold

    async def _refusal(
        self, rule: Rule, request: Request, params: Mapping[str, str], declared: int | None
    ) -> Response | None:
        """The answer refusing a request before its route runs, or None to let it through."""
        if declared == -1:
            REFUSED.inc("length")
            return self.refuse(request, BodyRefused(400, "The Content-Length is not a number."))
        if rule.check is not None:
            try:
                await rule.check(request, params)
            except (HTTPException, NeedsSignIn) as exc:
                REFUSED.inc("signin")
                return self.refuse(request, exc)
        if declared is not None and declared > rule.max_body:
            return self.refuse(request, too_large(rule, declared))  # refused unread
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check, cap and count one request."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.monotonic()
        status = 500  # unless an answer starts

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        method = str(scope["method"])
        found = self.match(method, str(scope["path"]))
        label = found[0].served.template if found else "unmatched"
        try:
            if found is None:
                await self.app(scope, receive, counted)
                return
            rule, params = found
            request = Request(scope)  # no receive: nothing here can read the body
            declared = _content_length(request)
            refused = await self._refusal(rule, request, params, declared)
            if refused is not None:  # answered here: the route never runs
                await refused(scope, receive, counted)
                return
            json = _is_json(request.headers.get("content-type", ""))
            body = _Body(receive, rule, self.options.max_json_depth if json else None)
            await self.app(scope, body.receive, counted)
        finally:
            REQUESTS.inc(label, method if method in _KNOWN else "other", str(status))
            SECONDS.observe(time.monotonic() - began, label)


_KNOWN = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _content_length(request: Request) -> int | None:
    """The declared body length; None when not declared, -1 when not a number."""
    value = request.headers.get("content-length")
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) < 19 else -1
