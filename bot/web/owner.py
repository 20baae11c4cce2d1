"""The owner's control page: everything an operator looks at, on one page (issue 31).

Pairings, users, processes and the leader, jobs, the outbox, a live log tail and the
effective configuration. Only the owner sees it (anyone else signed in gets 404: the page
is not advertised; a visitor who is not signed in is sent to sign in). It works without
scripts; one small script of lifebot's own (``/static/owner-log.js``, allowed by this
page's CSP only) keeps the log tail live by reading ``/owner/log`` every few seconds.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from bot.web.deps import Viewer, checked_form, ctx, owner
from bot.web.pages import back, render
from bot.web.params import RowId

router = APIRouter(prefix="/owner")
Owner = Annotated[Viewer, Depends(owner)]

SCRIPT = "owner-log.js"
"""The page's one script: the live log tail (the page works without it; ``render`` gives the
page the CSP that allows it: lifebot's own scripts only, Trusted Types required)."""


@router.get("", response_class=HTMLResponse)
async def overview(request: Request, who: Owner) -> HTMLResponse:
    """Everything an operator looks at, on one page."""
    c = ctx(request)
    s, control = c.service, c.control
    outbox = await control.outbox()
    return render(
        request,
        who,
        "owner.html",
        script=SCRIPT,
        pairings=await s.owner.pairings(),
        users=await s.owner.users(),
        processes=await control.processes(),
        lease=await control.leader(),
        leader=s.owner.is_leader(),
        jobs=await control.job_views(),
        runs=await control.recent_runs(),
        outbox=outbox,
        deliveries=outbox.newest,
        tail=await control.tail(),
        settings=control.settings,
        channels=s.owner.channel_names(),
    )


@router.get("/log")
async def log_tail(request: Request, _who: Owner) -> JSONResponse:
    """The newest log lines of every process (what the page's script shows, live)."""
    lines = await ctx(request).control.tail()
    return JSONResponse(
        {"lines": [line.as_json() for line in lines]}, headers={"Cache-Control": "no-store"}
    )


@router.post("/pairing/{code}/{decision}")
async def decide(request: Request, who: Owner, code: str, decision: str) -> Response:
    """Approve or refuse a pairing request."""
    await checked_form(request, who)
    if decision not in ("approve", "refuse"):
        raise HTTPException(404)
    req = await ctx(request).service.owner.decide_pairing(code, decision == "approve")
    if req is None:
        return await back(
            request,
            who,
            "/owner",
            error=f"{code} is not a pending pairing code (it may have expired).",
        )
    who_ = req.display_name or req.sender_id
    verb = "Approved" if decision == "approve" else "Refused"
    return await back(request, who, "/owner", note=f"{verb} {who_} on {req.channel}.")


@router.post("/outbox/{delivery_id}/retry")
async def retry(request: Request, who: Owner, delivery_id: RowId) -> Response:
    """Queue a failed push again."""
    await checked_form(request, who)
    if not await ctx(request).service.owner.retry_delivery(delivery_id):
        return await back(
            request, who, "/owner", error=f"Push #{delivery_id} is not a failed push."
        )
    return await back(request, who, "/owner", note=f"Push #{delivery_id} is queued again.")
