"""Omi's "Realtime audio bytes" webhook: ``POST /omi/<device token>?sample_rate=..&uid=..``.

The POSTs come from Omi's cloud backend (not the phone), which waits 15 s at most and retries a
chunk it got no answer for, with the same ``Idempotency-Key``. So the chunk is stored durably and
answered at once; transcription happens afterwards in the pendant channel. The token is in the
path because older Omi backends append ``?sample_rate=`` to the URL blindly. Omi ignores the
answer's body; a plain ``detail`` is there for people testing with curl. The token is checked
by the request layer before the body is read (``token_check``), and the body is capped there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from bot.device.omi import OmiRefused
from bot.web.deps import ctx

log = logging.getLogger(__name__)

router = APIRouter(tags=["omi"])


async def token_check(request: Request, params: Mapping[str, str]) -> None:
    """The request layer's check: the device token in the path, before the body is read."""
    if not await ctx(request).omi.knows(params.get("token", "")):
        raise HTTPException(401, "Unknown or revoked device token.")


@router.post("/omi/{token}")
async def omi_audio(token: str, request: Request) -> JSONResponse:
    """Store one chunk of raw PCM16 mono audio for the device this token belongs to."""
    body = await request.body()  # capped by the request layer (Route("/omi", max_body=...))
    try:
        outcome = await ctx(request).omi.receive(
            token,
            request.query_params.get("sample_rate"),
            request.headers.get("idempotency-key"),
            body,
        )
    except OmiRefused as exc:
        raise HTTPException(exc.status, exc.detail) from None
    except OSError as exc:
        # Not stored: a 5xx makes Omi's backend retry the chunk later.
        log.warning("an Omi audio chunk could not be stored: %s", exc)
        raise HTTPException(503, "lifebot cannot store audio right now.") from None
    return JSONResponse({"result": outcome.value})
