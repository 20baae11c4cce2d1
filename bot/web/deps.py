"""What every route needs: the service, the auth, templates, and who is asking.

Pages find the signed-in user from the session cookie (``viewer``); forms are checked for the
session's CSRF token (``checked_form``); the API finds the user from a bearer token
(``api_user``). Another user's object is always 404, never 403.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from bot.device.omi import OmiInbox
from bot.jobs.calendars.own import OwnCalendars
from bot.jobs.engine.control import ControlPanel
from bot.jobs.meetings.ingest import MeetingIngest
from bot.location.service import LocationService
from bot.messages import clean_text
from bot.web.auth import WRITE, WebAuth
from bot.web.chat import WebChat
from bot.web.services import WebService
from bot.web.sources import SourceView
from bot.web.uploads import Uploads
from storage.models import ApiToken, User, WebSession

COOKIE = "lifebot_session"
TEMPLATES = Path(__file__).parent / "templates"


def page_csp(*, scripts: bool = False) -> str:
    """The Content-Security-Policy of a page: nothing from other hosts, ever.

    Pages use no script, except the few that load one of lifebot's own files from
    ``/static`` (``scripts``): no inline script and no other host even then, and Trusted
    Types required, so those scripts cannot write HTML from strings. Inline images are the
    device QR code.
    """
    script = (
        "script-src 'self'; require-trusted-types-for 'script'"
        if scripts
        else ("script-src 'none'")
    )
    return (
        f"default-src 'self'; img-src 'self' data:; style-src 'self'; {script}; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; "
        "object-src 'none'"
    )


def highlight(text: str, terms: list[str]) -> Markup:
    """``text`` escaped, with every word starting like a query word wrapped in <mark>."""
    stems = sorted({t[: max(4, len(t) - 2)] for t in terms if len(t) > 2}, key=len, reverse=True)
    if not stems:
        return escape(text)
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, stems)) + r")\w*", re.IGNORECASE)
    out, i = Markup(""), 0
    for m in pattern.finditer(text):
        out += (
            escape(text[i : m.start()]) + Markup("<mark>") + escape(m.group()) + Markup("</mark>")
        )
        i = m.end()
    return out + escape(text[i:])


_CITED = re.compile(r"\[(\d{1,3})\]")


def cite(text: str, sources: list[SourceView]) -> Markup:
    """``text`` escaped, with each ``[n]`` a link that opens source n (where it has a page)."""
    links = {s.index: s for s in sources if s.href}
    out, i = Markup(""), 0
    for m in _CITED.finditer(text):
        found = links.get(int(m.group(1)))
        if found is None:
            continue
        out += escape(text[i : m.start()])
        out += Markup(
            '<a class="cite" href="{}"{}>{}<span class="sr-only"> (source: {})</span></a>'
        ).format(
            found.href,
            Markup(' rel="noopener noreferrer" target="_blank"') if found.external else "",
            m.group(),
            found.label,
        )
        i = m.end()
    return out + escape(text[i:])


def make_templates() -> Jinja2Templates:
    """The page templates with lifebot's filters."""
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["highlight"] = highlight
    templates.env.filters["cite"] = cite
    return templates


@dataclass(slots=True)
class WebContext:
    """Collaborators of every route (kept on ``app.state.web``)."""

    service: WebService
    auth: WebAuth
    templates: Jinja2Templates
    secure_cookies: bool
    """Set the cookie's Secure flag (the public URL is https)."""
    jobs_enabled: bool
    """This process may run the scheduler (readiness expects a leader somewhere)."""
    location: LocationService
    """Stores points from the phone apps (OwnTracks, Overland)."""
    meetings: MeetingIngest
    """Queues meeting transcripts posted by recorders."""
    omi: OmiInbox
    """Stores audio chunks from Omi's backend (``/omi/<token>``)."""
    calendars: OwnCalendars
    """The user's own calendars (ICS feeds, CalDAV): the same service /calendar add uses."""
    uploads: Uploads
    """Documents and photos sent from the page or the API (through dispatch)."""
    control: ControlPanel
    """The owner's control page: processes, jobs, outbox, logs, configuration."""
    chat: WebChat
    """The Chat page's messages, through the same dispatch."""


@dataclass(slots=True)
class Viewer:
    """The signed-in person of a page request."""

    user: User
    session: WebSession

    @property
    def user_id(self) -> int:
        """The user's id."""
        assert self.user.id is not None
        return self.user.id


class Refused(HTTPException):
    """A refusal whose problem details carry members of their own (RFC 9457 extensions)."""

    def __init__(
        self, status: int, detail: str, headers: dict[str, str] | None = None, **members: str
    ) -> None:
        super().__init__(status, detail, headers)
        self.members = members
        """Added to the problem details (``error: invalid_token`` for OAuth-minded clients)."""


class NeedsSignIn(Exception):
    """No valid session: the page redirects to the sign-in explanation."""


def ctx(request: Request) -> WebContext:
    """The app's collaborators."""
    found = request.app.state.web
    assert isinstance(found, WebContext)
    return found


async def viewer(request: Request) -> Viewer:
    """The signed-in user of this browser; NeedsSignIn otherwise (checked once a request)."""
    known = getattr(request.state, "viewer", None)
    if isinstance(known, Viewer):
        return known
    c = ctx(request)
    session = await c.auth.session(request.cookies.get(COOKIE))
    if session is None:
        raise NeedsSignIn
    user = await c.service.accounts.user(session.user_id)
    if user is None:
        raise NeedsSignIn
    found = Viewer(user, session)
    request.state.viewer = found
    return found


async def owner(request: Request) -> Viewer:
    """The signed-in owner; 404 for anyone else (owner pages are not advertised)."""
    v = await viewer(request)
    if not v.user.is_owner:
        raise HTTPException(404)
    return v


async def checked_form(request: Request, who: Viewer) -> dict[str, str]:
    """The posted form, after checking its CSRF token against the session's (403 if wrong)."""
    form = await request.form()
    token = form.get("csrf")
    if not isinstance(token, str) or not hmac.compare_digest(token, who.session.csrf):
        raise HTTPException(403, "This form has expired or did not come from lifebot's page.")
    # As typed, but storable: PostgreSQL's text columns refuse a NUL (see ``clean_text``).
    return {k: clean_text(v) for k, v in form.items() if isinstance(v, str)}


LOOKING = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods a read-only token may use; every other one changes something."""


async def _token_user(request: Request) -> tuple[ApiToken, User]:
    """The live API token of the request and its user; 401 without (checked once a request)."""
    known = getattr(request.state, "api_token", None)
    if known is not None:
        return known  # type: ignore[no-any-return]  # set below, always this pair
    c = ctx(request)
    token = await c.auth.api_token(request.headers.get("authorization"))
    user = await c.service.accounts.user(token.user_id) if token is not None else None
    if token is None or user is None:
        # RFC 6750's error code too: MCP clients and other OAuth-minded ones look for it.
        raise Refused(
            401,
            "Send a personal API token as 'Authorization: Bearer lbk_...' "
            "(create one on the Settings page).",
            headers={"WWW-Authenticate": "Bearer"},
            error="invalid_token",
        )
    request.state.api_token = (token, user)
    return token, user


async def api_user(request: Request) -> User:
    """The user of the request's API token; 401 without a valid one.

    A read-only token (scope ``read``) may only look: any other method is 403 before the
    route runs, so nothing changes.
    """
    token, user = await _token_user(request)
    if token.scope != WRITE and request.method not in LOOKING:
        raise HTTPException(
            403,
            "This token is read-only: it may look but not change anything. Make a token "
            "with the write scope on the Settings page to do this.",
        )
    return user


# --- the request layer's checks (bot.web.gate), run before a body is read ----------------------
async def session_check(request: Request, _params: Mapping[str, str]) -> None:
    """A signed-in browser."""
    await viewer(request)


async def owner_check(request: Request, _params: Mapping[str, str]) -> None:
    """The signed-in owner."""
    await owner(request)


async def bearer_check(request: Request, _params: Mapping[str, str]) -> None:
    """A live personal API token (what it may do is the route's to say: ``api_user``)."""
    await _token_user(request)
