"""Meeting transcripts in, from recorders and from Omi's conversation webhook.

``POST /api/v1/ingest/transcript`` takes a personal API token (Bearer); Omi's conversation
("memory created") webhook posts to ``POST /omi/<device token>/conversation``. Both are
acknowledged at once (202) with the job that will process it; the body is our JSON shape or
Omi's conversation (see ``bot.jobs.meetings.wire``). Omi's backend cannot send a header: it
posts the conversation as JSON with only ``Content-Type`` and appends ``?uid=<omi user>`` to
the URL as it is (a URL with its own query would break), so its token is in the path, as for
the audio webhook, and the path sits under ``/omi/`` like that one: one public prefix for Omi.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel

from bot.jobs.meetings.wire import BadTranscript, parse_meeting
from bot.messages import clean_texts
from bot.web.deps import api_user, ctx
from storage.models import User

router = APIRouter(prefix="/api/v1/ingest", tags=["ingest"])
omi_router = APIRouter(tags=["ingest"])
Me = Annotated[User, Depends(api_user)]
MAX_BODY = 5_000_000
"""Bytes: a three-hour meeting's transcript is well under a megabyte."""


class IngestOut(BaseModel):
    """The acknowledgement: what was queued and when it will be processed."""

    job_id: int
    meeting_id: str
    status: str
    process_after: datetime
    segments: int


@router.post(
    "/transcript",
    status_code=202,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "A meeting: meeting_id, start and segments (README: Meeting "
            "transcripts), or Omi's conversation webhook as Omi sends it.",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
    responses={
        400: {"description": "The body is not JSON."},
        413: {"description": "The transcript is over the size limit."},
        422: {"description": "Not a transcript lifebot accepts (the reason in words)."},
    },
)
async def transcript(request: Request, user: Me) -> IngestOut:
    """Queue a meeting transcript; a newer one for the same meeting replaces a pending one."""
    assert user.id is not None
    return await _queue(request, user.id, await request.body())


@omi_router.post("/omi/{token}/conversation", status_code=202)
async def omi_conversation(token: str, request: Request) -> IngestOut:
    """Omi's conversation webhook for the user whose Omi device this token is."""
    device = await ctx(request).service.devices.registry.authenticate(token)
    if device is None:
        raise HTTPException(401, "Unknown or revoked device token.")
    return await _queue(request, device.user_id, await _capped_body(request))


async def _capped_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise HTTPException(413, f"The transcript is larger than {MAX_BODY // 1_000_000} MB.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPException(413, f"The transcript is larger than {MAX_BODY // 1_000_000} MB.")
        chunks.append(chunk)
    return b"".join(chunks)


async def _queue(request: Request, user_id: int, raw: bytes) -> IngestOut:
    if len(raw) > MAX_BODY:
        raise HTTPException(413, f"The transcript is larger than {MAX_BODY // 1_000_000} MB.")
    try:
        body = clean_texts(json.loads(raw))  # storable: no NUL reaches PostgreSQL
    except (ValueError, RecursionError):  # RecursionError: nested too deeply for the parser
        raise HTTPException(
            400, "The body must be JSON (Content-Type: application/json)."
        ) from None
    try:
        meeting = parse_meeting(body)
    except BadTranscript as exc:
        raise HTTPException(
            422,
            f"Not a transcript lifebot accepts ({exc}). Send meeting_id, start and segments, "
            "or Omi's conversation webhook; README: Meeting transcripts.",
        ) from None
    job = await ctx(request).meetings.submit(user_id, meeting)
    assert job.id is not None
    return IngestOut(
        job_id=job.id,
        meeting_id=meeting.meeting_id,
        status=job.status,
        process_after=job.due_at,
        segments=len(meeting.segments),
    )
