"""The Upload page and ``/api/v1/uploads``: send lifebot a PDF or a photo from the browser.

The request layer refuses a body over the operator's file limit (``image_max_bytes``, plus room
for the form's envelope) before any of it is read, or as soon as a chunked one passes it; then
``Uploads.send`` checks the file and hands it to dispatch (see ``bot/web/uploads.py``). The
page's form carries the session's CSRF token; the API takes a personal token. An upload
belongs to its user: another user's id answers 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel
from starlette.datastructures import FormData, UploadFile

from bot.web.api import Me
from bot.web.deps import Viewer, checked_form, ctx, viewer
from bot.web.pages import back, render
from bot.web.params import RowId
from bot.web.uploads import KINDS, MAX_NOTE, UploadOutcome, Uploads, refused
from storage.models import User

router = APIRouter()
api_router = APIRouter(prefix="/api/v1", tags=["api"])
Who = Annotated[Viewer, Depends(viewer)]
PAGE = "/upload"

STATUS = {"too_big": 413, "wrong_type": 415, "empty": 422, "note": 422, "unavailable": 503}


class DocumentOut(BaseModel):
    """A PDF kept with an upload."""

    name: str
    pages: int
    """Pages read (0: it could not be opened)."""
    chunks: int
    """Searchable pieces of its text."""
    searchable: bool
    """Memory search finds its text (False for a scan without a text layer)."""


class PhotoOut(BaseModel):
    """A picture kept with an upload."""

    mime_type: str
    size: int
    """Bytes."""
    described: bool
    """A vision model described it (then search finds it by what it shows)."""
    description: str | None
    """What the model saw, when described."""


class UploadOut(BaseModel):
    """What became of an upload: what was stored and what lifebot said."""

    message_id: int
    """The stored message the file belongs to (``/memory/message/<id>`` shows it)."""
    status: str
    """``answered``, ``command``, ``llm_down`` (kept; the note waits for /retry) or ``failed``."""
    said: list[str]
    """lifebot's words about it, in order (empty when read back later)."""
    documents: list[DocumentOut]
    photos: list[PhotoOut]

    @classmethod
    def of(cls, o: UploadOutcome) -> UploadOut:
        """From an outcome that was stored."""
        return cls(
            message_id=o.message_id or 0,
            status=o.status,
            said=o.said,
            documents=[
                DocumentOut(name=d.name, pages=d.pages, chunks=d.chunks, searchable=d.chunks > 0)
                for d in o.documents
            ],
            photos=[
                PhotoOut(
                    mime_type=p.mime_type,
                    size=p.size,
                    described=p.described,
                    description=p.description,
                )
                for p in o.photos
            ],
        )


async def _send(form: FormData, user: User, uploads: Uploads) -> UploadOutcome:
    """The parsed form's file and note, through ``Uploads.send``."""
    file = form.get("file")
    if not isinstance(file, UploadFile) or not file.filename:
        return refused("empty", f"Choose a file to upload: {KINDS}.")
    note = form.get("note")
    data = await file.read(uploads.max_bytes + 1)  # enough to know it is too big
    return await uploads.send(
        user, file.filename, data, note if isinstance(note, str) else "", size=file.size
    )


# --- the page ----------------------------------------------------------------------------------
@router.get(PAGE, response_class=HTMLResponse)
async def upload_page(request: Request, who: Who, message: RowId | None = None) -> HTMLResponse:
    """The form; after an upload, what was stored."""
    uploads = ctx(request).uploads
    done = await uploads.get(who.user, message) if message is not None else None
    return render(
        request,
        who,
        "upload.html",
        done=done,
        max_mb=f"{uploads.max_bytes / 1_000_000:.1f}",
        max_note=MAX_NOTE,
        kinds=KINDS,
    )


@router.post(PAGE)
async def upload(request: Request, who: Who) -> Response:
    """Take a file (and a note) as if it was sent in chat; say what became of it."""
    uploads = ctx(request).uploads
    form = await request.form(max_files=1)
    try:
        await checked_form(request, who)
        outcome = await _send(form, who.user, uploads)
    finally:
        await form.close()  # its file is spooled to a temporary file
    if not outcome.stored:
        return await back(request, who, PAGE, error=" ".join(outcome.said))
    return await back(
        request, who, f"{PAGE}?message={outcome.message_id}", note=" ".join(outcome.said)
    )


# --- the API -----------------------------------------------------------------------------------
_MULTIPART: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "note": {"type": "string", "maxLength": MAX_NOTE},
                    },
                }
            }
        },
    }
}


@api_router.post(
    "/uploads",
    status_code=201,
    openapi_extra=_MULTIPART,
    responses={
        413: {"description": "The file is over the size limit; nothing was stored."},
        415: {"description": "Not a PDF or a picture lifebot reads; nothing was stored."},
        503: {"description": "lifebot could not store it just now; try again."},
    },
)
async def upload_api(request: Request, me: Me) -> UploadOut:
    """Upload a PDF or a photo (multipart ``file``, optional ``note``), as if sent in chat.

    413 over the size limit, 415 for another kind of file, 422 without a file; nothing is
    stored then.
    """
    uploads = ctx(request).uploads
    form = await request.form(max_files=1)
    try:
        outcome = await _send(form, me, uploads)
    finally:
        await form.close()
    if not outcome.stored:
        raise HTTPException(STATUS.get(outcome.problem or "", 422), " ".join(outcome.said))
    return UploadOut.of(outcome)


@api_router.get("/uploads/{message_id}")
async def get_upload(request: Request, me: Me, message_id: RowId) -> UploadOut:
    """What one of your uploads stored (404 for anyone else's)."""
    found = await ctx(request).uploads.get(me, message_id)
    if found is None:
        raise HTTPException(404, "No such upload.")
    return UploadOut.of(found)
