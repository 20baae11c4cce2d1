"""The REST API under /api/v1: the pages' operations as JSON, for a personal API token.

Every endpoint is scoped to the token's user; another user's ids answer 404. A read-only token
(scope ``read``) may only GET: anything else is 403 and changes nothing (``deps.api_user``).
Every list is a page (``bot.web.paging``): ``?limit=&cursor=``, and ``next`` in the answer.
201 answers a POST that created something, with its id; 200 one that found it already there;
409 a name already taken, or a proposal answered already or expired. Every refusal is RFC 9457
problem details (``bot.web.problems``); ``bot.web.openapi`` documents all of it at
``/api/openapi.json``.
"""

from __future__ import annotations

import hashlib
from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask

from bot.agent.memory.facts import NOT_A_FACT
from bot.device.registry import NameTaken
from bot.jobs.calendars.proposals import ProposalClosed
from bot.jobs.reminders.phrases import PhraseError
from bot.web.deps import api_user, ctx
from bot.web.paging import (
    DEFAULT_LIMIT,
    Cursor,
    Limit,
    Page,
    Seal,
    keyset_page,
    next_offset,
    offset_cursor,
    stamp,
)
from bot.web.params import BodyIn, Day, RowId
from bot.web.services.facts import FactRefused
from bot.web.services.journal import JOURNAL_DAYS, MAX_SERIES_DAYS
from bot.web.services.settings import SettingsChange
from storage.models import ApiToken, Device, Reminder, User

router = APIRouter(prefix="/api/v1", tags=["api"])
Me = Annotated[User, Depends(api_user)]


class UserOut(BaseModel):
    """The token's user and their schedule settings."""

    id: int
    name: str
    timezone: str
    briefing_time: str
    briefing_enabled: bool
    quiet_start: str | None
    quiet_end: str | None
    preferred_channel: str | None
    channels: list[str]

    @classmethod
    def of(cls, u: User, channels: list[str]) -> UserOut:
        """From a user row."""
        return cls(
            id=u.id or 0,
            name=u.display_name,
            timezone=u.timezone,
            briefing_time=u.briefing_time,
            briefing_enabled=u.briefing_enabled,
            quiet_start=u.quiet_start,
            quiet_end=u.quiet_end,
            preferred_channel=u.preferred_channel,
            channels=channels,
        )


class HitOut(BaseModel):
    """A memory search hit and the page that opens its source."""

    kind: str
    source_id: int
    when: datetime
    channel: str
    speaker: str
    text: str
    matched: str
    link: str


SEARCH_MAX = 50
"""The most hits one page of a search holds."""
SEARCH_DEPTH = 200
"""How far down its ranking a search can be paged."""
SearchLimit = Annotated[
    int, Query(ge=1, le=SEARCH_MAX, description=f"Hits per page, 1 to {SEARCH_MAX} (default 10).")
]


class SearchOut(Page[HitOut]):
    """One page of search hits, best first."""

    note: str | None = Field(description="What the search could not do, in words (or null).")


class FactOut(BaseModel):
    """A fact and the message ids it was learned from."""

    id: int
    text: str
    category: str
    sources: list[int]


class TextIn(BodyIn):
    """A text body (a fact, a reminder request, a device name)."""

    text: str = Field(min_length=1, max_length=2000)


class Said(BaseModel):
    """What lifebot answered, in words."""

    message: str


class FactSaved(BaseModel):
    """A fact lifebot now keeps: a new one (201) or one it already knew (200)."""

    id: int
    action: Literal["added", "superseded", "known"]
    """``superseded``: added, replacing ``replaced_id``."""
    message: str
    replaced_id: int | None = None


class ReminderOut(BaseModel):
    """An active reminder."""

    id: int
    text: str
    next_at: datetime
    recurring: bool
    place: str | None = None
    """The place it is about, if named."""
    people: list[str] = []
    """The people it is about or with, if named."""

    @classmethod
    def of(cls, r: Reminder) -> ReminderOut:
        """From a reminder row."""
        return cls(
            id=r.id or 0,
            text=r.text,
            next_at=r.next_at,
            recurring=bool(r.recurrence),
            place=r.place,
            people=list(r.people or []),
        )


class EventOut(BaseModel):
    """A calendar event."""

    id: int
    title: str
    start_at: datetime
    end_at: datetime
    place: str | None
    people: list[str] = []
    """Who the event is with, if named."""


class ProposalOut(BaseModel):
    """A proposed event waiting for an answer."""

    id: int
    title: str
    start_at: datetime
    end_at: datetime
    question: str


class DeviceOut(BaseModel):
    """A pendant."""

    id: int
    name: str
    created_at: datetime
    last_seen_at: datetime | None
    revoked: bool

    @classmethod
    def of(cls, d: Device) -> DeviceOut:
        """From a device row."""
        return cls(
            id=d.id or 0,
            name=d.name,
            created_at=d.created_at,
            last_seen_at=d.last_seen_at,
            revoked=d.revoked_at is not None,
        )


class NewDeviceOut(DeviceOut):
    """A new pendant and its token (shown only in this answer)."""

    token: str


class SettingsIn(BodyIn):
    """Settings to change; leave a field out to keep it."""

    timezone: str | None = None
    briefing_time: str | None = None
    briefing_enabled: bool | None = None
    quiet: str | None = Field(None, description="HH:MM-HH:MM or off")
    preferred_channel: str | None = Field(None, description="a linked channel, or auto")


class PointOut(BaseModel):
    """One bucket of a journal series: the average score (0-100) and how many entries."""

    start: date
    label: str
    mean: float | None = Field(description="None when no entry falls in the bucket")
    count: int
    entry_ids: list[int]


class SeriesOut(BaseModel):
    """A journal metric over a range, bucket by bucket."""

    metric: str
    start: date
    end: date
    bucket: str
    count: int = Field(description="entries in the whole range")
    points: list[PointOut]


def _404() -> HTTPException:
    return HTTPException(404, "Not found.")


def seal_of(request: Request) -> Seal:
    """What seals this server's cursors (``bot.web.paging``)."""
    return ctx(request).auth.seal


def uid(user: User) -> int:
    """The user's id (a stored user always has one)."""
    assert user.id is not None
    return user.id


@router.get("/me")
async def me(request: Request, user: Me) -> UserOut:
    """Who the token belongs to, and their settings."""
    idents = await ctx(request).service.settings.identities(user)
    return UserOut.of(user, sorted({i.channel for i in idents}))


@router.patch("/settings")
async def patch_settings(request: Request, user: Me, body: SettingsIn) -> UserOut:
    """Change time zone, briefing, quiet hours or preferred channel (422 on bad values)."""
    s = ctx(request).service
    change = SettingsChange(**body.model_dump(), echo=False)
    fresh = await s.settings.change_settings(user, change, partly=False)
    if change.errors:
        raise HTTPException(422, " ".join(change.errors))
    idents = await s.settings.identities(fresh)
    return UserOut.of(fresh, sorted({i.channel for i in idents}))


@router.get("/memory/search")
async def search(
    request: Request, user: Me, q: str, limit: SearchLimit = 10, cursor: Cursor = None
) -> SearchOut:
    """Search memory, best hits first; every hit names its source and the page that opens it.

    Pages reach the first 200 hits of the ranking; a cursor is good for its query only.
    """
    if not q.strip():  # a search for nothing would answer with whatever ranks first
        raise RequestValidationError(
            [{"type": "missing", "loc": ("query", "q"), "msg": "say what to search for"}]
        )
    scope = "search:" + hashlib.sha256(q.encode()).hexdigest()[:16]
    seal = seal_of(request)
    offset = await offset_cursor(seal, scope, uid(user), cursor)
    end = min(offset + limit, SEARCH_DEPTH)
    result = await ctx(request).service.memory.search(user, q, limit=end + 1)
    hits = result.hits[offset:end]
    more = len(result.hits) > end and end < SEARCH_DEPTH
    return SearchOut(
        items=[HitOut.model_validate(h, from_attributes=True) for h in hits],
        next=await next_offset(seal, scope, uid(user), end) if more else None,
        note=result.note,
    )


@router.get("/facts")
async def facts(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[FactOut]:
    """What lifebot knows about you, oldest first."""
    page, nxt = await keyset_page(
        await ctx(request).service.facts.facts(user),
        lambda f: (f.id or 0,),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="facts",
        user_id=uid(user),
    )
    return Page[FactOut](
        items=[
            FactOut(
                id=f.id or 0, text=f.text, category=f.category, sources=f.source_message_ids or []
            )
            for f in page
        ],
        next=nxt,
    )


@router.post(
    "/facts",
    status_code=201,
    responses={200: {"model": FactSaved, "description": "Already known: the fact it is."}},
)
async def add_fact(request: Request, user: Me, body: TextIn, response: Response) -> FactSaved:
    """Remember a fact: 201 with its id when stored.

    200 with the known fact's id when lifebot already knew it; 422 when it cannot be kept as
    one fact (nothing is stored then).
    """
    s = ctx(request).service
    decision = await s.facts.remember_decision(user, body.text)
    said = s.facts.engine.remember_reply(decision)
    if decision.fact is None or decision.fact.id is None:
        raise HTTPException(422, f"{NOT_A_FACT}; nothing was stored.")
    if decision.action == "known":
        response.status_code = 200
    replaced = decision.replaced.id if decision.replaced is not None else None
    return FactSaved(
        id=decision.fact.id,
        action="known" if decision.action == "known" else decision.action,
        message=said,
        replaced_id=replaced,
    )


class FactEdited(BaseModel):
    """A fact's new words: what was done, and the id the fact is known by now."""

    id: int
    """New words make a new fact (the old one is kept in history), so use this id from now on."""
    message: str


@router.put("/facts/{fact_id}")
async def edit_fact(request: Request, user: Me, fact_id: RowId, body: TextIn) -> FactEdited:
    """Change a fact's words; the answer's ``id`` is the one the fact has now.

    422 when no fact can have the new words (nothing changes then).
    """
    try:
        edited = await ctx(request).service.facts.edit_fact(user, fact_id, body.text)
    except FactRefused as exc:
        raise HTTPException(422, str(exc)) from exc
    if edited is None:
        raise _404()
    return FactEdited(message=edited[0], id=edited[1])


@router.delete("/facts/{fact_id}", status_code=204)
async def forget_fact(request: Request, user: Me, fact_id: RowId) -> Response:
    """Forget a fact."""
    if await ctx(request).service.facts.forget(user, fact_id) is None:
        raise _404()
    return Response(status_code=204)


@router.get("/reminders")
async def reminders(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[ReminderOut]:
    """Active reminders, soonest first."""
    page, nxt = await keyset_page(
        await ctx(request).service.reminders.reminders(user),
        lambda r: (stamp(r.next_at), r.id or 0),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="reminders",
        user_id=uid(user),
    )
    return Page[ReminderOut](items=[ReminderOut.of(r) for r in page], next=nxt)


@router.post("/reminders", status_code=201)
async def add_reminder(request: Request, user: Me, body: TextIn) -> ReminderOut:
    """Create a reminder from words ("tomorrow at 9 to call mom"); 422 when unreadable."""
    try:
        created = await ctx(request).service.reminders.add_reminder(user, body.text)
    except PhraseError as exc:
        raise HTTPException(422, str(exc)) from exc
    return ReminderOut.of(created.reminder)


@router.delete("/reminders/{reminder_id}", status_code=204)
async def cancel_reminder(request: Request, user: Me, reminder_id: RowId) -> Response:
    """Cancel a reminder."""
    if await ctx(request).service.reminders.cancel_reminder(user, reminder_id) is None:
        raise _404()
    return Response(status_code=204)


@router.get("/events")
async def events(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[EventOut]:
    """Calendar events from yesterday to two months ahead, soonest first."""
    page, nxt = await keyset_page(
        await ctx(request).service.calendar.events(user),
        lambda e: (stamp(e.start_at), e.id or 0),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="events",
        user_id=uid(user),
    )
    return Page[EventOut](
        items=[
            EventOut(
                id=e.id or 0,
                title=e.title,
                start_at=e.start_at,
                end_at=e.end_at,
                place=e.place,
                people=list(e.people or []),
            )
            for e in page
        ],
        next=nxt,
    )


@router.get("/proposals")
async def proposals(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[ProposalOut]:
    """Proposed events waiting for an answer, soonest first."""
    s = ctx(request).service
    page, nxt = await keyset_page(
        await s.calendar.proposals(user),
        lambda p: (stamp(p.start_at), p.id or 0),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="proposals",
        user_id=uid(user),
    )
    return Page[ProposalOut](
        items=[
            ProposalOut(
                id=p.id or 0,
                title=p.title,
                start_at=p.start_at,
                end_at=p.end_at,
                question=s.calendar.proposal_words(p, user),
            )
            for p in page
        ],
        next=nxt,
    )


_CLOSED = "The proposal was answered already or has expired (the detail says which)."


class Rename(BodyIn):
    """A new title for a proposed event."""

    title: str = Field(min_length=1, max_length=120)


@router.post("/proposals/{proposal_id}/rename", responses={409: {"description": _CLOSED}})
async def rename(request: Request, user: Me, proposal_id: RowId, body: Rename) -> Said:
    """Give a pending proposed event a new title (422 for a title of only spaces)."""
    if not body.title.strip():
        raise HTTPException(422, "A title needs at least one word.")
    try:
        said = await ctx(request).service.calendar.rename_proposal(user, proposal_id, body.title)
    except ProposalClosed as exc:
        raise HTTPException(409, str(exc)) from exc
    if said is None:
        raise _404()
    return Said(message=said)


@router.post("/proposals/{proposal_id}/{answer}", responses={409: {"description": _CLOSED}})
async def answer(request: Request, user: Me, proposal_id: RowId, answer: str) -> Said:
    """``accept`` or ``decline`` a proposed event."""
    if answer not in ("accept", "decline"):
        raise _404()
    try:
        said = await ctx(request).service.calendar.answer_proposal(
            user, proposal_id, answer == "accept"
        )
    except ProposalClosed as exc:  # answered already (a second tap, another device), expired
        raise HTTPException(409, str(exc)) from exc
    if said is None:
        raise _404()
    return Said(message=said)


@router.get("/devices")
async def devices(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[DeviceOut]:
    """Your pendants, newest first (revoked ones too, marked)."""
    page, nxt = await keyset_page(
        await ctx(request).service.devices.devices(user),
        lambda d: (-(d.id or 0),),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="devices",
        user_id=uid(user),
    )
    return Page[DeviceOut](items=[DeviceOut.of(d) for d in page], next=nxt)


@router.post(
    "/devices",
    status_code=201,
    responses={409: {"description": "A live pendant with that name already exists."}},
)
async def add_device(request: Request, user: Me, body: TextIn) -> NewDeviceOut:
    """Add a pendant named ``text``; the token is in this answer only."""
    try:
        d, token = await ctx(request).service.devices.add_device(user, body.text)
    except NameTaken as exc:
        raise HTTPException(409, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    return NewDeviceOut(**DeviceOut.of(d).model_dump(), token=token)


@router.delete("/devices/{device_id}", status_code=204)
async def revoke_device(request: Request, user: Me, device_id: RowId) -> Response:
    """Revoke a pendant."""
    if await ctx(request).service.devices.revoke_device(user, device_id) is None:
        raise _404()
    return Response(status_code=204)


class TokenIn(BodyIn):
    """A new personal API token: its name and what it may do."""

    name: str = Field("token", max_length=60)
    scope: Literal["read", "write"] = Field(
        "read", description="read: look only; write: may also change things"
    )


class TokenOut(BaseModel):
    """A personal API token (never its secret, except once in ``NewTokenOut``)."""

    id: int
    name: str
    scope: str
    hint: str = Field(description="the token's first characters")
    created_at: datetime
    last_used_at: datetime | None

    @classmethod
    def of(cls, t: ApiToken) -> TokenOut:
        """The API shape of a token row."""
        return cls(
            id=t.id or 0,
            name=t.name,
            scope=t.scope,
            hint=t.hint,
            created_at=t.created_at,
            last_used_at=t.last_used_at,
        )


class NewTokenOut(TokenOut):
    """A new token and its secret (shown only in this answer)."""

    token: str


@router.get("/tokens")
async def tokens(
    request: Request, user: Me, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[TokenOut]:
    """Your live API tokens, oldest first (names, scopes and hints; never the secrets)."""
    page, nxt = await keyset_page(
        await ctx(request).auth.api_tokens(uid(user)),
        lambda t: (t.id or 0,),
        limit=limit,
        cursor=cursor,
        seal=seal_of(request),
        scope="tokens",
        user_id=uid(user),
    )
    return Page[TokenOut](items=[TokenOut.of(t) for t in page], next=nxt)


@router.post("/tokens", status_code=201)
async def add_token(request: Request, user: Me, body: TokenIn) -> NewTokenOut:
    """Make a token (read-only unless ``scope`` is write); the secret is in this answer only.

    Only a write token may make tokens, so a read-only one can never give itself more.
    """
    assert user.id is not None
    row, secret = await ctx(request).auth.new_api_token(user.id, body.name, body.scope)
    return NewTokenOut(**TokenOut.of(row).model_dump(), token=secret)


@router.delete("/tokens/{token_id}", status_code=204)
async def revoke_token(request: Request, user: Me, token_id: RowId) -> Response:
    """Revoke one of your tokens (it stops working at once)."""
    assert user.id is not None
    if not await ctx(request).auth.revoke_api_token(user.id, token_id):
        raise _404()
    return Response(status_code=204)


@router.get(
    "/export",
    response_class=Response,
    responses={
        200: {
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
            "description": "A zip of all your data and files (what `lifebot export` writes).",
        }
    },
)
async def export(request: Request, user: Me) -> Response:
    """All your data and files as a zip (the one ``lifebot export`` writes)."""
    service = ctx(request).service
    path = await service.data.export_file(user)
    return FileResponse(
        path,
        media_type="application/zip",
        filename="lifebot-export.zip",
        headers={"Cache-Control": "no-store"},
        background=BackgroundTask(service.data.forget_export, path),
    )


@router.get("/journal/series")
async def journal_series(
    request: Request,
    user: Me,
    metric: Literal["happiness", "stress", "energy"],
    start: Day | None = None,
    end: Day | None = None,
    bucket: Literal["day", "week", "month"] = "day",
) -> SeriesOut:
    """A journal metric's averages with counts (default: the last 30 days, daily)."""
    s = ctx(request).service
    _, today = s.journal.journal_range(user, 1)
    last = end or today
    first = start or last - timedelta(days=JOURNAL_DAYS - 1)
    if first > last:
        raise HTTPException(422, "start is after end.")
    if (last - first).days >= MAX_SERIES_DAYS:
        raise HTTPException(422, f"Ask for at most {MAX_SERIES_DAYS} days at a time.")
    points = await s.journal.journal_series(user, metric, first, last, bucket)
    return SeriesOut(
        metric=metric,
        start=first,
        end=last,
        bucket=bucket,
        count=sum(p.count for p in points),
        points=[
            PointOut(
                start=p.start,
                label=p.label,
                mean=p.mean,
                count=p.count,
                entry_ids=list(p.entry_ids),
            )
            for p in points
        ],
    )
