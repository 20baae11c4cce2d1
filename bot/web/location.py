"""Location in over HTTP: the OwnTracks app's HTTP mode and the Overland app's batches.

OwnTracks authenticates with HTTP Basic (any user name; the password is the user's location
token from ``/location token``) and expects a JSON array back. Overland sends the same token as
``Authorization: Bearer`` and counts a batch as received only on ``{"result": "ok"}``, which is
therefore answered only after the points are stored; a bad point in a batch is skipped (counted
in the answer and the log), never a reason to refuse the batch, which the phone would re-send
forever. A body that cannot be read at all gets a 4xx with a plain ``detail`` and stores
nothing. The token is checked by the request layer before the body is
read, and the body is capped there (``Route("/api/location", ..., max_body=...)``).

OwnTracks keeps a message at the head of its queue until it gets a 2xx (Android:
``HttpMessageProcessorEndpoint.kt`` re-queues it and retries a location about a week; iOS:
``Connection.m`` retries it for good), whatever its booklet's older "any status code" says. So
only what the person can put right is refused (a wrong token, location off: the points wait on
the phone). A location that can never be stored (a missing or impossible field, a clock far
ahead) is answered ``[]`` and logged; an encrypted message (the app's Encryption key is set) is
answered ``[]`` too, and the person is told once, in chat, why nothing arrives and how to turn
the encryption off.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from bot.location import wire
from bot.location.geo import Fix
from bot.location.service import LocationOff
from bot.web.deps import ctx

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/location", tags=["location"])


def _basic_password(header: str | None) -> str | None:
    """The password of an HTTP Basic header; the user name is never read.

    OwnTracks for Android encodes "user:password" as ISO-8859-1 (OkHttp's
    ``Credentials.basic``), others as UTF-8: only the password (the ASCII token) is decoded,
    so a User ID such as "José" works either way.
    """
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except binascii.Error:
        return None
    password = decoded.partition(b":")[2]
    try:
        return password.decode() or None
    except UnicodeDecodeError:
        return None


def _bearer(header: str | None) -> str | None:
    if not header or not header.lower().startswith("bearer "):
        return None
    return header[7:].strip() or None


def _scheme(path: str) -> str:
    """OwnTracks speaks HTTP Basic, Overland a bearer token."""
    return "Basic" if path.endswith("/owntracks") else "Bearer"


async def phone_check(request: Request, _params: Mapping[str, str]) -> None:
    """The request layer's check: the location token, before the body is read."""
    header = request.headers.get("authorization")
    scheme = _scheme(request.url.path)
    secret = _basic_password(header) if scheme == "Basic" else _bearer(header)
    user_id = await ctx(request).location.user_for_token(secret) if secret else None
    if user_id is None:
        raise HTTPException(
            401,
            "Wrong or revoked location token: send /location token to lifebot for a new one.",
            headers={"WWW-Authenticate": f'{scheme} realm="lifebot location"'},
        )
    request.state.location_user = user_id


async def _user(request: Request) -> int:
    known = getattr(request.state, "location_user", None)
    if not isinstance(known, int):
        await phone_check(request, {})
    user_id = request.state.location_user
    assert isinstance(user_id, int)
    return user_id


async def _store(request: Request, user_id: int, fixes: list[Fix], source: str) -> int:
    try:
        return await ctx(request).location.ingest(user_id, fixes, source)
    except LocationOff:
        raise HTTPException(
            403, "Location is off for this account: send /location on to lifebot first."
        ) from None


def _bad(exc: wire.BadPayload) -> HTTPException:
    return HTTPException(exc.status, f"Not stored: {exc}.")


@router.post("/owntracks")
async def owntracks(request: Request) -> JSONResponse:
    """One OwnTracks message; locations are stored, every other type is ignored.

    A location that cannot be stored is acknowledged too (the phone would resend it before
    anything else, for days): only a wrong token or location off are refused.
    """
    user_id = await _user(request)
    body = await request.body()  # capped by the request layer (bot/web/gate.py)
    try:
        fixes = wire.owntracks(body, ctx(request).service.clock.now())
    except wire.Encrypted:
        told = await ctx(request).location.tell_encrypted(user_id)
        log.info(
            "an OwnTracks post for user %s was encrypted with the app's Encryption key, which "
            "lifebot cannot read: acknowledged, not stored%s",
            user_id,
            "; the user is told how to turn it off" if told else " (the user was told before)",
        )
        return JSONResponse([])
    except wire.Unusable as exc:
        log.info(
            "an OwnTracks location for user %s was not stored: %s; acknowledged so the phone "
            "sends the points queued after it",
            user_id,
            exc,
        )
        return JSONResponse([])
    except wire.BadPayload as exc:
        raise _bad(exc) from None
    if fixes:
        await _store(request, user_id, fixes, "owntracks")
    return JSONResponse([])


SKIPPED_SHOWN = 10
"""Reasons listed in an answer; the count covers every skipped point."""


@router.post("/overland")
async def overland(request: Request) -> JSONResponse:
    """One Overland batch; ``{"result": "ok"}`` once its good points are stored.

    The answer also says how many points were new (``stored``) and how many could not be
    stored (``skipped``, with the first reasons in ``skipped_why``); Overland reads only
    ``result``.
    """
    user_id = await _user(request)
    body = await request.body()  # capped by the request layer (bot/web/gate.py)
    try:
        batch = wire.overland(body, ctx(request).service.clock.now())
    except wire.BadPayload as exc:
        raise _bad(exc) from None
    stored = await _store(request, user_id, batch.fixes, "overland")
    if batch.skipped:
        log.info(
            "skipped %d of %d point(s) in an Overland batch for user %s that cannot be stored "
            "(first: %s); the rest are kept",
            len(batch.skipped),
            len(batch.skipped) + len(batch.fixes),
            user_id,
            batch.skipped[0],
        )
    return JSONResponse(
        {
            "result": "ok",
            "stored": stored,
            "skipped": len(batch.skipped),
            "skipped_why": batch.skipped[:SKIPPED_SHOWN],
        }
    )
