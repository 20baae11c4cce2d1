"""Contacts on the web: the Contacts page and /api/v1/contacts (list, add, change, delete).

Every id is checked against the signed-in (or token) user: another user's contact is a 404.
Forms carry the session's CSRF token like every page form.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field, field_validator

from bot.agent.contacts import LIMITS, too_long
from bot.web.api import Me, seal_of, uid
from bot.web.deps import Viewer, checked_form, ctx, viewer
from bot.web.pages import back, render
from bot.web.paging import DEFAULT_LIMIT, Cursor, Limit, Page, keyset_page
from bot.web.params import BodyIn, RowId
from storage.models import Contact

router = APIRouter()
api_router = APIRouter(prefix="/api/v1", tags=["api"])
Who = Annotated[Viewer, Depends(viewer)]
FIELDS = ("name", "aliases", "relationship", "reach")


class ContactOut(BaseModel):
    """A contact."""

    id: int
    name: str
    aliases: list[str]
    """Other names the person goes by."""
    relationship: str
    reach: str
    """How to reach them (phone, email, address), as written."""

    @classmethod
    def of(cls, c: Contact) -> ContactOut:
        """From a contact row."""
        aliases = [a.strip() for a in c.aliases.split(",") if a.strip()]
        return cls(
            id=c.id or 0, name=c.name, aliases=aliases, relationship=c.relationship, reach=c.reach
        )


class ContactIn(BodyIn):
    """A new contact, or the fields to change (omitted fields stay)."""

    name: str | None = Field(None, min_length=1, max_length=LIMITS["name"])
    aliases: list[str] | None = None
    """Other names; together, comma separated, at most 200 characters."""
    relationship: str | None = Field(None, max_length=LIMITS["relationship"])
    reach: str | None = Field(None, max_length=LIMITS["reach"])

    @field_validator("aliases")
    @classmethod
    def _aliases_fit(cls, aliases: list[str] | None) -> list[str] | None:
        # each name may be short and the list still long: the stored field is the joined text
        said = too_long(
            aliases=", ".join(a.strip() for a in aliases if a.strip()) if aliases else None
        )
        if said is not None:
            raise ValueError(said)
        return aliases

    def fields(self) -> dict[str, str | None]:
        """As repository fields (aliases comma separated)."""
        aliases = None  # omitted: leave them; [] clears them
        if self.aliases is not None:
            aliases = ", ".join(a.strip() for a in self.aliases if a.strip())
        return {
            # a name of spaces is no name: None for "leave it", "" for "refuse it"
            "name": self.name.strip() if self.name is not None else None,
            "aliases": aliases,
            "relationship": self.relationship,
            "reach": self.reach,
        }


async def _contacts(request: Request, user_id: int) -> list[Contact]:
    return await ctx(request).service.contacts.every(user_id)


# --- the page ---------------------------------------------------------------------------------
@router.get("/contacts", response_class=HTMLResponse)
async def contacts(request: Request, who: Who) -> HTMLResponse:
    """The user's contacts, each editable, and a form to add one."""
    return render(request, who, "contacts.html", contacts=await _contacts(request, who.user_id))


@router.post("/contacts/add")
async def add(request: Request, who: Who) -> Response:
    """Add a contact (or update the filled-in fields of the one with that name)."""
    form = await checked_form(request, who)
    name = form.get("name", "").strip()
    if not name:
        return await back(request, who, "/contacts", error="A contact needs a name.")
    said = too_long(**{k: form.get(k, "").strip() for k in FIELDS})
    if said is not None:
        return await back(request, who, "/contacts", error=f"Not saved: {said}")
    # A field left blank is not given: adding someone again keeps what was there.
    saved, _ = await ctx(request).service.contacts.put(
        who.user_id,
        name,
        aliases=form.get("aliases", "").strip() or None,
        relationship=form.get("relationship", "").strip() or None,
        reach=form.get("reach", "").strip() or None,
    )
    return await back(request, who, "/contacts", note=f"Saved: {saved.name}")


@router.post("/contacts/{contact_id}/edit")
async def edit(request: Request, who: Who, contact_id: RowId) -> Response:
    """Change a contact's name, other names, relationship or how to reach them."""
    form = await checked_form(request, who)
    fields = {k: form[k].strip() for k in FIELDS if k in form}
    if not fields.get("name", "x"):
        return await back(request, who, "/contacts", error="A contact needs a name.")
    said = too_long(**fields)
    if said is not None:
        return await back(request, who, "/contacts", error=f"Not saved: {said}")
    try:
        saved = await ctx(request).service.contacts.change(who.user_id, contact_id, **fields)
    except ValueError as exc:
        return await back(request, who, "/contacts", error=str(exc))
    if saved is None:
        raise HTTPException(404)
    return await back(request, who, "/contacts", note=f"Saved: {saved.name}")


@router.post("/contacts/{contact_id}/delete")
async def delete(request: Request, who: Who, contact_id: RowId) -> Response:
    """Delete a contact."""
    await checked_form(request, who)
    gone = await ctx(request).service.contacts.remove(who.user_id, contact_id)
    if gone is None:
        raise HTTPException(404)
    return await back(request, who, "/contacts", note=f"Deleted: {gone.name}")


# --- the API ----------------------------------------------------------------------------------
@api_router.get("/contacts")
async def list_contacts(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[ContactOut]:
    """The token user's contacts, by name."""
    page, nxt = await keyset_page(
        await _contacts(request, uid(user)),
        lambda c: (c.name.casefold(), c.id or 0),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="contacts",
        user_id=uid(user),
    )
    return Page[ContactOut](items=[ContactOut.of(c) for c in page], next=nxt)


@api_router.post(
    "/contacts",
    status_code=201,
    responses={200: {"model": ContactOut, "description": "Updated the contact with that name."}},
)
async def add_contact(
    request: Request, user: Me, body: ContactIn, response: Response
) -> ContactOut:
    """Add a contact: 201 when made; 200 when one with that name was there (updated).

    The name matches in any case; on an existing contact only the fields sent change.
    """
    fields = body.fields()
    if not fields["name"]:
        raise HTTPException(422, "A contact needs a name.")
    saved, created = await ctx(request).service.contacts.put(
        uid(user),
        fields["name"],
        aliases=fields["aliases"],
        relationship=fields["relationship"],
        reach=fields["reach"],
    )
    if not created:
        response.status_code = 200
    return ContactOut.of(saved)


@api_router.patch(
    "/contacts/{contact_id}",
    responses={409: {"description": "Another of your contacts has that name."}},
)
async def change_contact(
    request: Request, user: Me, contact_id: RowId, body: ContactIn
) -> ContactOut:
    """Change some of a contact's fields."""
    assert user.id is not None
    fields = body.fields()
    if fields["name"] == "":
        raise HTTPException(422, "A contact needs a name.")
    try:
        saved = await ctx(request).service.contacts.change(user.id, contact_id, **fields)
    except ValueError as exc:
        raise HTTPException(409, str(exc)) from exc
    if saved is None:
        raise HTTPException(404, "Not found.")
    return ContactOut.of(saved)


@api_router.delete("/contacts/{contact_id}", status_code=204)
async def delete_contact(request: Request, user: Me, contact_id: RowId) -> Response:
    """Delete a contact."""
    assert user.id is not None
    gone = await ctx(request).service.contacts.remove(user.id, contact_id)
    if gone is None:
        raise HTTPException(404, "Not found.")
    return Response(status_code=204)
