"""The user's own calendars on the web: the Your calendars page and /api/v1/calendars.

The same OwnCalendars service the /calendar add|list|remove chat command uses, so an address
is checked by the same rules (http(s) or webcal, read once before it is stored, refused on
this machine or a private network unless the operator allows it). Every id is checked against
the signed-in (or token) user: another user's calendar answers 404. A feed address is a
secret, so pages and the API show it with its secret parts hidden.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from bot.errors import CalendarError
from bot.jobs.calendars.own import kind_words, shown_url
from bot.web.api import Me, seal_of, uid
from bot.web.deps import Viewer, checked_form, ctx, viewer
from bot.web.pages import back, render
from bot.web.paging import DEFAULT_LIMIT, Cursor, Limit, Page, keyset_page
from bot.web.params import BodyIn, RowId
from storage.models import CalendarSource

router = APIRouter()
api_router = APIRouter(prefix="/api/v1", tags=["api"])
Who = Annotated[Viewer, Depends(viewer)]
PAGE = "/calendars"


class CalendarOut(BaseModel):
    """One of the user's own calendars."""

    id: int
    name: str
    kind: str
    """``ics`` (a read-only feed) or ``caldav`` (two-way)."""
    kind_words: str
    """The kind in words."""
    address: str
    """The address with every part that may be a secret replaced by ``…``."""
    last_read_at: datetime | None
    """When it was last read successfully (None: never)."""
    last_error: str | None
    """Why the last read failed, in plain words (None after a good read)."""
    events: int
    """How many events the last good read brought in."""

    @classmethod
    def of(cls, c: CalendarSource) -> CalendarOut:
        """From a calendar source row (the address hidden)."""
        return cls(
            id=c.id or 0,
            name=c.name,
            kind=c.kind,
            kind_words=kind_words(c.kind),
            address=shown_url(c.url),
            last_read_at=c.last_synced_at,
            last_error=c.last_error,
            events=c.event_count,
        )


class FeedIn(BodyIn):
    """An ICS feed to subscribe to."""

    url: str = Field(min_length=1, max_length=2000)
    """The feed's http(s):// or webcal:// address."""
    name: str | None = Field(None, max_length=80)
    """What to call it (the address's host name when omitted)."""


def _refused(exc: CalendarError) -> str:
    return f"I could not subscribe: {exc}. Nothing was added."


def _read_words(source: CalendarSource) -> str:
    if source.last_error:
        return (
            f"Could not read {source.name}: {source.last_error}. "
            "The events from the last good read stay."
        )
    return f"Read {source.name}: {source.event_count} event(s)."


# --- the page ---------------------------------------------------------------------------------
@router.get(PAGE, response_class=HTMLResponse)
async def calendars(request: Request, who: Who) -> HTMLResponse:
    """The user's own calendars, each with refresh and remove, and a form to add a feed."""
    sources = await ctx(request).calendars.sources(who.user_id)
    return render(request, who, "calendars.html", sources=[CalendarOut.of(c) for c in sources])


@router.post(f"{PAGE}/add")
async def add(request: Request, who: Who) -> Response:
    """Subscribe to an ICS feed (read once now; a refused address stores nothing)."""
    form = await checked_form(request, who)
    url = form.get("url", "").strip()
    if not url:
        return await back(
            request, who, PAGE, error="Paste your calendar's ICS address (https:// or webcal://)."
        )
    try:
        said = await ctx(request).calendars.subscribe(who.user, url, form.get("name"))
    except CalendarError as exc:
        return await back(request, who, PAGE, error=_refused(exc))
    return await back(request, who, PAGE, note=said)


@router.post(PAGE + "/{source_id}/refresh")
async def refresh(request: Request, who: Who, source_id: RowId) -> Response:
    """Re-read one calendar now."""
    await checked_form(request, who)
    source = await ctx(request).calendars.refresh_now(who.user, source_id)
    if source is None:
        raise HTTPException(404)
    if source.last_error:
        return await back(request, who, PAGE, error=_read_words(source))
    return await back(request, who, PAGE, note=_read_words(source))


@router.post(PAGE + "/{source_id}/delete")
async def delete(request: Request, who: Who, source_id: RowId) -> Response:
    """Remove a calendar and the events it brought in."""
    await checked_form(request, who)
    done = await ctx(request).calendars.drop(who.user_id, source_id)
    if done is None:
        raise HTTPException(404)
    return await back(
        request, who, PAGE, note=f"Removed {done.source.name} and its {done.events} event(s)."
    )


# --- the API ----------------------------------------------------------------------------------
@api_router.get("/calendars")
async def list_calendars(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[CalendarOut]:
    """The token user's own calendars, oldest first."""
    page, nxt = await keyset_page(
        await ctx(request).calendars.sources(uid(user)),
        lambda c: (c.id or 0,),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="calendars",
        user_id=uid(user),
    )
    return Page[CalendarOut](items=[CalendarOut.of(c) for c in page], next=nxt)


@api_router.post(
    "/calendars",
    status_code=201,
    responses={200: {"description": "Already subscribed to that address: that calendar."}},
)
async def add_calendar(request: Request, user: Me, body: FeedIn, response: Response) -> CalendarOut:
    """Subscribe to an ICS feed (read once now); 422 with the reason when it is refused."""
    try:
        done = await ctx(request).calendars.add_feed(user, body.url, body.name)
    except CalendarError as exc:
        raise HTTPException(422, _refused(exc)) from exc
    if done.already:
        response.status_code = 200
    return CalendarOut.of(done.source)


@api_router.post("/calendars/{source_id}/refresh")
async def refresh_calendar(request: Request, user: Me, source_id: RowId) -> CalendarOut:
    """Re-read one calendar now; a failed read is in ``last_error`` (its events stay)."""
    source = await ctx(request).calendars.refresh_now(user, source_id)
    if source is None:
        raise HTTPException(404, "Not found.")
    return CalendarOut.of(source)


@api_router.delete("/calendars/{source_id}", status_code=204)
async def delete_calendar(request: Request, user: Me, source_id: RowId) -> Response:
    """Remove a calendar and the events it brought in."""
    assert user.id is not None
    if await ctx(request).calendars.drop(user.id, source_id) is None:
        raise HTTPException(404, "Not found.")
    return Response(status_code=204)
