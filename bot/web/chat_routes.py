"""The Chat page: ``GET /chat`` shows the conversation, ``POST /chat`` sends one message.

The post is an ordinary form (a message, a file, or a pressed button's ``data``, with the
session's CSRF token). Without a script it is answered, once the turn is over, by a redirect
back to the page, which shows the answer from the conversation. The page's own script
(``/static/chat.js``) sends the same form with ``Accept: application/x-ndjson`` and reads the
answer from the response as it is written, one JSON object per line:

- ``{"type": "progress", "label": "Searching your notes…"}``
- ``{"type": "delta", "text": "more of the answer"}``
- ``{"type": "message", "kind": "reply", "text": …, "sources": [{"index", "label", "href",
  "external"}], "buttons": [{"label", "data"}]}`` (the final answer; a command's reply; a
  notice such as "I read lease.pdf")
- ``{"type": "done", "status": "answered", "message_id": 12}`` (the stored message)

Why a streamed POST rather than Server-Sent Events: ``EventSource`` can only GET, so the
message would go in one request and the answer come back in another, which a load balancer
may send to another process than the one running the turn. Here the turn and its stream
stay in one request, behind any balancer, with the session cookie and CSRF token of every
other form. A refused message (too big, wrong kind) is a 4xx with ``{"error": words}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.datastructures import UploadFile

from bot.clock import zone
from bot.dispatch import DispatchResult
from bot.web.channel import Delta, Progress, Said
from bot.web.chat import ChatTurn
from bot.web.deps import Viewer, checked_form, ctx, viewer
from bot.web.pages import back, render
from bot.web.sources import source_views
from bot.web.upload_routes import STATUS
from bot.web.uploads import KINDS, MAX_NOTE, UploadOutcome

router = APIRouter()
Who = Annotated[Viewer, Depends(viewer)]
PAGE = "/chat"
STREAM = "application/x-ndjson"


@router.get(PAGE, response_class=HTMLResponse)
async def chat_page(request: Request, who: Who) -> HTMLResponse:
    """The web conversation, and a box to write in (with a file to attach)."""
    c = ctx(request)
    lines = await c.chat.lines(who.user, zone(who.user.timezone))
    return render(
        request,
        who,
        "chat.html",
        script="chat.js",
        lines=lines,
        kinds=KINDS,
        max_note=MAX_NOTE,
        max_mb=f"{c.uploads.max_bytes / 1_000_000:.1f}",
    )


@router.post(PAGE, response_model=None)
async def chat_send(request: Request, who: Who) -> Response:
    """Send a message (words, a file, or a button's data) through dispatch."""
    c = ctx(request)
    streaming = STREAM in request.headers.get("accept", "")
    # A body over the file limit never gets here: the request layer refused it (413).
    form = await request.form(max_files=1)
    try:
        fields = await checked_form(request, who)
        upload = form.get("file")
        sent: tuple[str, bytes, int | None] | None = None
        if isinstance(upload, UploadFile) and upload.filename:
            data = await upload.read(c.uploads.max_bytes + 1)  # enough to know it is too big
            sent = (upload.filename, data, upload.size)
    finally:
        await form.close()  # a file is spooled to a temporary file
    text, pressed = fields.get("text", ""), fields.get("data") or None
    problem = c.chat.check(text, sent, pressed)
    if problem is not None:
        return await _refused(request, who, problem, streaming)
    turn = c.chat.begin(who.user, text, (sent[0], sent[1]) if sent else None, pressed)
    if streaming:
        return StreamingResponse(
            _lines(request, who, turn),
            media_type=STREAM,
            # Proxies (nginx) would hold the answer back until it is whole.
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
    await turn.finished()
    return RedirectResponse(f"{PAGE}#end", status_code=303)


async def _refused(
    request: Request, who: Viewer, problem: UploadOutcome, streaming: bool
) -> Response:
    """A message that was not taken: in words, nothing stored."""
    words = " ".join(problem.said)
    if streaming:
        return JSONResponse({"error": words}, status_code=STATUS.get(problem.problem or "", 422))
    return await back(request, who, f"{PAGE}#write", error=words)


async def _lines(request: Request, who: Viewer, turn: ChatTurn) -> AsyncIterator[str]:
    """The turn as it happens, one JSON object per line."""
    c = ctx(request)
    tz = zone(who.user.timezone)
    yield _line({"type": "accepted"})  # the browser knows at once the message was taken
    async for event in turn.events():
        out: dict[str, Any]
        if isinstance(event, Progress):
            out = {"type": "progress", "label": event.label}
        elif isinstance(event, Delta):
            out = {"type": "delta", "text": event.text}
        elif isinstance(event, Said):
            msg = event.message
            sources = await source_views(c.service.memory_views, who.user_id, msg.citations, tz)
            out = {
                "type": "message",
                "kind": msg.kind,
                "text": msg.text,
                "sources": [asdict(s) for s in sources],
                "buttons": [{"label": b.label, "data": b.data} for b in msg.buttons],
            }
        else:
            assert isinstance(event, DispatchResult)
            out = {
                "type": "done",
                "status": event.status,
                "message_id": await c.chat.stored_id(turn),
            }
        yield _line(out)


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False) + "\n"
