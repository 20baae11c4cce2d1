"""Named places on the web: the Places page and /api/v1/places (list, rename, mark, delete).

The same LocationService the /place chat command uses; every id is checked against the
signed-in user (another user's place answers 404). Coordinates are shown only to their owner.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from bot.location.service import PLACE_NAME_RULE, NamingError
from bot.web.api import Me, seal_of, uid
from bot.web.deps import Viewer, checked_form, ctx, viewer
from bot.web.pages import back, render
from bot.web.paging import DEFAULT_LIMIT, Cursor, Limit, Page, keyset_page
from bot.web.params import BodyIn, RowId
from storage.models import Place

router = APIRouter()
api_router = APIRouter(prefix="/api/v1", tags=["api"])
Who = Annotated[Viewer, Depends(viewer)]
Kind = Literal["normal", "home", "ignored"]


class PlaceOut(BaseModel):
    """A named place."""

    id: int
    name: str
    kind: str
    """``normal``, ``home`` (home-like: never proposed) or ``ignored`` (never proposed)."""
    aliases: list[str]
    lat: float
    lon: float
    radius_m: float

    @classmethod
    def of(cls, p: Place) -> PlaceOut:
        """From a place row."""
        aliases = [a.strip() for a in p.aliases.split(",") if a.strip()]
        return cls(
            id=p.id or 0,
            name=p.name,
            kind=p.kind,
            aliases=aliases,
            lat=p.lat,
            lon=p.lon,
            radius_m=p.radius_m,
        )


class PlaceChange(BodyIn):
    """A new name and/or kind (omitted fields stay)."""

    name: str | None = Field(None, min_length=1, max_length=60)
    kind: Kind | None = None


# --- the page ---------------------------------------------------------------------------------
@router.get("/places", response_class=HTMLResponse)
async def places(request: Request, who: Who) -> HTMLResponse:
    """The user's places, each with rename, mark and delete."""
    assert who.user.id is not None
    items = await ctx(request).location.places(who.user.id)
    return render(request, who, "places.html", places=items)


@router.post("/places/{place_id}/rename")
async def rename(request: Request, who: Who, place_id: RowId) -> Response:
    """Rename a place."""
    form = await checked_form(request, who)
    return await _change(request, who, place_id, name=form.get("name", ""))


@router.post("/places/{place_id}/kind/{kind}")
async def mark(request: Request, who: Who, place_id: RowId, kind: str) -> Response:
    """Mark a place home-like, ignored or normal."""
    await checked_form(request, who)
    if kind not in ("normal", "home", "ignored"):
        raise HTTPException(404)
    return await _change(request, who, place_id, kind=kind)


@router.post("/places/{place_id}/delete")
async def delete(request: Request, who: Who, place_id: RowId) -> Response:
    """Delete a place (its stays become unnamed again)."""
    await checked_form(request, who)
    assert who.user.id is not None
    if not await ctx(request).location.delete_place(who.user.id, place_id):
        raise HTTPException(404)
    return await back(request, who, "/places", note="Deleted; its stays are unnamed again.")


async def _change(
    request: Request,
    who: Viewer,
    place_id: RowId,
    *,
    name: str | None = None,
    kind: str | None = None,
) -> Response:
    assert who.user.id is not None
    try:
        place = await ctx(request).location.change_place(
            who.user.id, place_id, name=name, kind=kind
        )
    except NamingError as exc:
        return await back(request, who, "/places", error=str(exc))
    if place is None:
        raise HTTPException(404)
    shown = {"home": " (home-like)", "ignored": " (ignored)"}.get(place.kind, "")
    return await back(request, who, "/places", note=f"Saved: {place.name}{shown}")


# --- the API ----------------------------------------------------------------------------------
@api_router.get("/places")
async def list_places(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[PlaceOut]:
    """The token user's places, by name."""
    page, nxt = await keyset_page(
        await ctx(request).location.places(uid(user)),
        lambda p: (p.name.casefold(), p.id or 0),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="places",
        user_id=uid(user),
    )
    return Page[PlaceOut](items=[PlaceOut.of(p) for p in page], next=nxt)


@api_router.patch(
    "/places/{place_id}",
    responses={409: {"description": "Another of your places has that name."}},
)
async def change_place(request: Request, user: Me, place_id: RowId, body: PlaceChange) -> PlaceOut:
    """Rename a place and/or change its kind."""
    assert user.id is not None
    if body.name is not None and not body.name.strip():  # no name at all is not a clash (409)
        raise HTTPException(422, PLACE_NAME_RULE)
    try:
        place = await ctx(request).location.change_place(
            user.id, place_id, name=body.name, kind=body.kind
        )
    except NamingError as exc:
        raise HTTPException(409, str(exc)) from exc
    if place is None:
        raise HTTPException(404, "Not found.")
    return PlaceOut.of(place)


@api_router.delete("/places/{place_id}", status_code=204)
async def delete_place(request: Request, user: Me, place_id: RowId) -> Response:
    """Delete a place; its stays become unnamed again."""
    assert user.id is not None
    if not await ctx(request).location.delete_place(user.id, place_id):
        raise HTTPException(404, "Not found.")
    return Response(status_code=204)
