"""The owner's pages: pairing requests, users, the outbox, jobs and the leader, channels."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from bot.web.deps import Viewer, checked_form, ctx, owner
from bot.web.pages import back, render

router = APIRouter(prefix="/owner")
Owner = Annotated[Viewer, Depends(owner)]


@router.get("", response_class=HTMLResponse)
async def overview(request: Request, who: Owner) -> HTMLResponse:
    """Everything an operator looks at, on one page."""
    s = ctx(request).service
    jobs, leases = await s.job_states()
    return render(
        request,
        who,
        "owner.html",
        pairings=await s.pairings(),
        users=await s.users(),
        deliveries=await s.deliveries(),
        jobs=jobs,
        leases=leases,
        leader=s.is_leader(),
        channels=s.channel_names(),
    )


@router.post("/pairing/{code}/{decision}")
async def decide(request: Request, who: Owner, code: str, decision: str) -> Response:
    """Approve or refuse a pairing request."""
    await checked_form(request, who)
    if decision not in ("approve", "refuse"):
        raise HTTPException(404)
    req = await ctx(request).service.decide_pairing(code, decision == "approve")
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
async def retry(request: Request, who: Owner, delivery_id: int) -> Response:
    """Queue a failed push again."""
    await checked_form(request, who)
    if not await ctx(request).service.retry_delivery(delivery_id):
        return await back(
            request, who, "/owner", error=f"Push #{delivery_id} is not a failed push."
        )
    return await back(request, who, "/owner", note=f"Push #{delivery_id} is queued again.")
