"""Server-rendered pages of one signed-in user (no JavaScript needed).

Every form posts back with the session's CSRF token and is answered by a redirect (303) to
the page it came from; what the post did waits in the session and the next page says it once
(nothing personal goes into a URL).
"""

from __future__ import annotations

import asyncio
from datetime import date, datetime, timedelta
from typing import Annotated, Any

import segno
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.background import BackgroundTask

from bot.agent.journal.analytics import METRIC_NAMES, Metric
from bot.agent.memory.memory_file import MAX_FILE_CHARS, MemoryFileError, settle
from bot.clock import zone
from bot.jobs.calendars.proposals import ProposalClosed
from bot.jobs.reminders.phrases import PhraseError
from bot.jobs.zones import ZONES
from bot.location.service import NamingError
from bot.web.auth import READ, WRITE
from bot.web.deps import COOKIE, Viewer, checked_form, ctx, page_csp, viewer
from bot.web.params import FIRST_DAY, LAST_DAY, Day, RowId, SpanDays
from bot.web.services.facts import FactRefused
from bot.web.services.journal import JOURNAL_DAYS
from bot.web.services.settings import SettingsChange

router = APIRouter()
MAX_MEMORY_FILE_BYTES = 4 * MAX_FILE_CHARS
"""A posted memory file larger than this is refused before it is read (URL-encoded bytes)."""
Who = Annotated[Viewer, Depends(viewer)]


FLASH_TTL = timedelta(minutes=5)
"""A form post's result is shown by a page opened within this time, else dropped."""
FLASH_CHARS = 600
"""The longest note or error kept for the next page."""
KNOWN_ERRORS = {
    "expired": "That page had expired: please try again.",
}
"""The only errors a URL may ask a page to show (``?error=expired``): codes, never words."""


def render(
    request: Request, who: Viewer, name: str, *, script: str | None = None, **values: Any
) -> HTMLResponse:
    """A page with the user, their CSRF token, their zone and the result of the last post.

    The result waits in the session (``back``) and is shown once: the page clears it after
    it is sent. ``script``: a file of ``/static`` the page loads (its CSP then allows it).
    """
    c = ctx(request)
    flash = _fresh_flash(who, c.service.clock.now())
    code = request.query_params.get("error", "")
    values.update(
        user=who.user,
        csrf=who.session.csrf,
        tz=zone(who.user.timezone),
        note=flash.get("note"),
        error=flash.get("error") or KNOWN_ERRORS.get(code),
        undo=flash.get("undo"),
        script=script,
        here=request.url.path,
    )
    background = None
    if who.session.flash is not None and who.session.id is not None:
        background = BackgroundTask(c.auth.flash, who.session.id, None)
    response = c.templates.TemplateResponse(request, name, values, background=background)
    if script is not None:
        response.headers["Content-Security-Policy"] = page_csp(scripts=True)
    return response


def _fresh_flash(who: Viewer, now: datetime) -> dict[str, Any]:
    """The session's waiting result, when recent enough to belong to this page."""
    flash = who.session.flash or {}
    try:
        at = datetime.fromisoformat(str(flash.get("at")))
    except ValueError:
        return {}
    return flash if now - at <= FLASH_TTL else {}


async def back(
    request: Request,
    who: Viewer,
    path: str,
    *,
    note: str | None = None,
    error: str | None = None,
    undo: tuple[str, str] | None = None,
) -> RedirectResponse:
    """Redirect after a form; its result waits in the session for the next page.

    Never in the URL: browser history and proxy logs keep URLs.

    ``undo``: (the form action that takes it back, the button's label), shown with the note.
    """
    if (note or error) and who.session.id is not None:
        flash: dict[str, Any] = {"at": ctx(request).service.clock.now().isoformat()}
        if note:
            flash["note"] = note[:FLASH_CHARS]
        if error:
            flash["error"] = error[:FLASH_CHARS]
        if undo:
            flash["undo"] = {"action": undo[0], "label": undo[1]}
        await ctx(request).auth.flash(who.session.id, flash)
    return RedirectResponse(path, status_code=303)


# --- Today -----------------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse)
async def today(request: Request, who: Who) -> HTMLResponse:
    """Next reminders, proposals awaiting an answer, the briefing."""
    s = ctx(request).service
    proposals = [
        (p, s.calendar.proposal_words(p, who.user)) for p in await s.calendar.proposals(who.user)
    ]
    preview = None
    if request.query_params.get("preview") == "1":
        preview = await s.reminders.briefing_preview(who.user)
    return render(
        request,
        who,
        "today.html",
        reminders=(await s.reminders.reminders(who.user))[:8],
        proposals=proposals,
        events=(await s.calendar.events(who.user, days=2))[:8],
        preview=preview,
        questions=await s.pending.questions(who.user),
        waiting=await s.pending.waiting(who.user),
    )


@router.post("/waiting/{message_id}/retry")
async def retry_waiting(request: Request, who: Who, message_id: RowId) -> Response:
    """Answer a message that waits for /retry; the answer goes where it was asked."""
    await checked_form(request, who)
    if not await ctx(request).service.pending.retry(who.user, message_id):
        return await back(request, who, "/", error="That message no longer waits.")
    return await back(request, who, "/", note="Answered: my reply is in the chat where you asked.")


@router.post("/questions/{message_id}/{choice}")
async def answer_question(request: Request, who: Who, message_id: RowId, choice: str) -> Response:
    """Answer a question lifebot asked, as its button would; the reply goes to that chat."""
    await checked_form(request, who)
    if not (choice == "other" or (choice.isascii() and choice.isdigit() and len(choice) <= 3)):
        raise HTTPException(404)
    if not await ctx(request).service.pending.answer_question(who.user, message_id, choice):
        return await back(request, who, "/", error="That question no longer waits for an answer.")
    return await back(request, who, "/", note="Answered: my reply is in the chat where I asked.")


@router.post("/proposals/{proposal_id}/rename")
async def rename_proposal(request: Request, who: Who, proposal_id: RowId) -> Response:
    """Rename a proposed event; for a stay at an unnamed place, the name names the place."""
    form = await checked_form(request, who)
    c = ctx(request)
    p = await c.service.calendar.proposal(who.user, proposal_id)
    if p is None:
        raise HTTPException(404)
    name = form.get("title", "")
    if p.source == "location" and p.place is None:
        assert who.user.id is not None
        try:
            done = await c.location.name_from_proposal(
                who.user.id, proposal_id, name, zone(who.user.timezone)
            )
        except NamingError as exc:
            return await back(request, who, "/", error=str(exc))
        return await back(
            request, who, "/", note=f"Saved the place {done.place.name}; later stays there use it."
        )
    try:
        said = await c.service.calendar.rename_proposal(who.user, proposal_id, name)
    except ProposalClosed as exc:  # the page says it, as chat does
        said = str(exc)
    return await back(request, who, "/", note=said)


@router.post("/proposals/{proposal_id}/{answer}")
async def answer_proposal(request: Request, who: Who, proposal_id: RowId, answer: str) -> Response:
    """Accept or decline a proposed event."""
    await checked_form(request, who)
    if answer not in ("accept", "decline"):
        raise HTTPException(404)
    try:
        said = await ctx(request).service.calendar.answer_proposal(
            who.user, proposal_id, answer == "accept"
        )
    except ProposalClosed as exc:
        said = str(exc)
    if said is None:
        raise HTTPException(404)
    return await back(request, who, "/", note=said)


@router.post("/briefing/send")
async def send_briefing(request: Request, who: Who) -> Response:
    """Queue a briefing now."""
    await checked_form(request, who)
    await ctx(request).service.reminders.send_briefing(who.user)
    return await back(request, who, "/", note="Your briefing is on its way to your chat.")


# --- Memory ----------------------------------------------------------------------------------
@router.get("/memory", response_class=HTMLResponse)
async def memory(request: Request, who: Who, q: str = "", day: Day | None = None) -> HTMLResponse:
    """Search, and the day-by-day timeline (``day``: 1900 to 2999, like every date here)."""
    s = ctx(request).service
    result = await s.memory.search(who.user, q) if q.strip() else None
    days = await s.memory.recent_days(who.user)
    shown = day or (days[0] if days else None)
    messages = await s.memory.day(who.user, shown) if shown else []
    return render(
        request,
        who,
        "memory.html",
        q=q,
        result=result,
        days=days[:60],
        shown=shown,
        prev_day=_pager_day(shown, -1),
        next_day=_pager_day(shown, 1),
        messages=messages,
        episodes=(await s.memory.episodes(who.user))[:20],
    )


def _pager_day(shown: date | None, step: int) -> date | None:
    """The timeline's day before or after ``shown``; None past the days an address may name."""
    if shown is None or not FIRST_DAY <= shown <= LAST_DAY:
        return None
    if shown == (FIRST_DAY if step < 0 else LAST_DAY):
        return None
    return shown + timedelta(days=step)


@router.get("/memory/message/{message_id}", response_class=HTMLResponse)
async def message(request: Request, who: Who, message_id: RowId) -> HTMLResponse:
    """A conversation opened at one turn."""
    found = await ctx(request).service.memory.around(who.user, message_id)
    if found is None:
        raise HTTPException(404)
    target, around = found
    return render(request, who, "conversation.html", target=target, messages=around)


@router.get("/memory/episode/{episode_id}", response_class=HTMLResponse)
async def episode(request: Request, who: Who, episode_id: RowId) -> HTMLResponse:
    """An episode and its messages."""
    found = await ctx(request).service.memory.episode(who.user, episode_id)
    if found is None:
        raise HTTPException(404)
    ep, messages = found
    return render(request, who, "episode.html", episode=ep, messages=messages)


# --- Journal ---------------------------------------------------------------------------------
@router.get("/journal", response_class=HTMLResponse)
async def journal(request: Request, who: Who, days: SpanDays = JOURNAL_DAYS) -> HTMLResponse:
    """Recent entries with their scores, and a chart of each metric over the last days."""
    s = ctx(request).service
    first, last = s.journal.journal_range(who.user, days)
    return render(
        request,
        who,
        "journal.html",
        days=(last - first).days + 1,
        views=await s.journal.journal_views(who.user, first, last),
        entries=await s.journal.journal_entries(who.user),
    )


@router.get("/journal/chart.png")
async def journal_chart(
    request: Request, who: Who, metric: str = "happiness", days: SpanDays = JOURNAL_DAYS
) -> Response:
    """One metric's chart as a PNG (the page's <img>); 404 with too little to draw."""
    if metric not in METRIC_NAMES:
        raise HTTPException(404)
    chosen: Metric = metric  # narrowed by the check above
    s = ctx(request).service
    first, last = s.journal.journal_range(who.user, days)
    png = await s.journal.journal_chart(who.user, chosen, first, last)
    if png is None:
        raise HTTPException(404)
    # Private data: never kept by a shared cache.
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, no-store"})


# --- Facts -----------------------------------------------------------------------------------
@router.get("/facts", response_class=HTMLResponse)
async def facts(request: Request, who: Who) -> HTMLResponse:
    """What lifebot knows, each with its sources."""
    s = ctx(request).service
    rows = []
    for f in await s.facts.facts(who.user):
        found = await s.facts.fact(who.user, f.id or 0)
        rows.append((f, found[1] if found else []))
    return render(request, who, "facts.html", rows=rows)


@router.post("/facts")
async def add_fact(request: Request, who: Who) -> Response:
    """Remember a typed fact."""
    form = await checked_form(request, who)
    text = form.get("text", "").strip()
    if not text:
        return await back(request, who, "/facts", error="Type something to remember.")
    return await back(
        request, who, "/facts", note=await ctx(request).service.facts.remember(who.user, text)
    )


@router.post("/facts/{fact_id}/edit")
async def edit_fact(request: Request, who: Who, fact_id: RowId) -> Response:
    """Change a fact's words."""
    form = await checked_form(request, who)
    try:
        edited = await ctx(request).service.facts.edit_fact(who.user, fact_id, form.get("text", ""))
    except FactRefused as exc:
        return await back(request, who, "/facts", error=str(exc))
    if edited is None:
        raise HTTPException(404)
    return await back(request, who, "/facts", note=edited[0])


@router.post("/facts/{fact_id}/forget")
async def forget_fact(request: Request, who: Who, fact_id: RowId) -> Response:
    """Forget a fact."""
    await checked_form(request, who)
    gone = await ctx(request).service.facts.forget(who.user, fact_id)
    if gone is None:
        raise HTTPException(404)
    return await back(
        request,
        who,
        "/facts",
        note=f"Forgotten: {gone.text}",
        undo=(f"/facts/{fact_id}/restore", "Undo"),
    )


@router.post("/facts/{fact_id}/restore")
async def restore_fact(request: Request, who: Who, fact_id: RowId) -> Response:
    """Undo a Forget."""
    await checked_form(request, who)
    back_again = await ctx(request).service.facts.restore_fact(who.user, fact_id)
    if back_again is None:
        return await back(request, who, "/facts", error="That fact cannot come back any more.")
    return await back(request, who, "/facts", note=f"Kept: {back_again.text}")


# --- MEMORY.md -------------------------------------------------------------------------------
@router.get("/memory/file", response_class=HTMLResponse)
async def memory_file(request: Request, who: Who) -> HTMLResponse:
    """The user's facts and rules as one Markdown file, to read, edit here, or download."""
    text = await ctx(request).service.facts.memory_file(who.user)
    return render(request, who, "memory_file.html", text=text, report=None)


@router.get("/memory/file.md")
async def memory_file_download(request: Request, who: Who) -> Response:
    """MEMORY.md as a file."""
    text = await ctx(request).service.facts.memory_file(who.user)
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={
            "Content-Disposition": 'attachment; filename="MEMORY.md"',
            "Cache-Control": "private, no-store",
        },
    )


@router.post("/memory/file", response_class=HTMLResponse)
async def apply_memory_file(request: Request, who: Who) -> Response:
    """Read an edited copy back; conflicts with newer chat changes are shown, nothing lost."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_MEMORY_FILE_BYTES:
        return await back(
            request, who, "/memory/file", error="That file is too long to be a memory file."
        )
    form = await checked_form(request, who)
    text = form.get("text", "")
    s = ctx(request).service
    try:
        report = await s.facts.apply_memory_file(who.user, text)
    except MemoryFileError as exc:
        return await back(
            request, who, "/memory/file", error=f"I couldn't read that as your memory file: {exc}."
        )
    if not report.conflicts:
        return await back(request, who, "/memory/file", note=report.describe())
    # The person's copy stays in the box beside what changed in chat, so nothing is lost;
    # its conflicting lines now name the newer facts, so saving it again keeps its words.
    page = render(
        request, who, "memory_file.html", text=settle(text, report.conflicts), report=report
    )
    page.status_code = 409
    return page


# --- Reminders -------------------------------------------------------------------------------
@router.get("/reminders", response_class=HTMLResponse)
async def reminders(request: Request, who: Who) -> HTMLResponse:
    """Active reminders and a box to add one in words."""
    items = await ctx(request).service.reminders.reminders(who.user)
    return render(request, who, "reminders.html", reminders=items)


@router.post("/reminders")
async def add_reminder(request: Request, who: Who) -> Response:
    """Create a reminder from words ("tomorrow at 9 to call mom")."""
    form = await checked_form(request, who)
    try:
        created = await ctx(request).service.reminders.add_reminder(who.user, form.get("text", ""))
    except PhraseError as exc:
        return await back(request, who, "/reminders", error=str(exc))
    return await back(request, who, "/reminders", note=created.text)


@router.post("/reminders/{reminder_id}/cancel")
async def cancel_reminder(request: Request, who: Who, reminder_id: RowId) -> Response:
    """Cancel a reminder."""
    await checked_form(request, who)
    gone = await ctx(request).service.reminders.cancel_reminder(who.user, reminder_id)
    if gone is None:
        raise HTTPException(404)
    return await back(request, who, "/reminders", note=f"Cancelled: {gone.text or 'reminder'}")


# --- Calendar --------------------------------------------------------------------------------
@router.get("/calendar", response_class=HTMLResponse)
async def calendar(request: Request, who: Who) -> HTMLResponse:
    """Events, and the calendar subscription for phones."""
    return await _calendar_page(request, who, None)


async def _calendar_page(request: Request, who: Viewer, feed_url: str | None) -> HTMLResponse:
    c = ctx(request)
    response = render(
        request,
        who,
        "calendar.html",
        events=await c.service.calendar.events(who.user),
        feed_on=await c.auth.has_ics(who.user_id),
        feed_url=feed_url,
    )
    if feed_url:
        response.headers["Cache-Control"] = "no-store"  # the secret URL is shown once
    return response


@router.post("/calendar/feed", response_class=HTMLResponse)
async def calendar_feed(request: Request, who: Who) -> Response:
    """Make a new subscription URL (the old one stops), or turn the feed off."""
    form = await checked_form(request, who)
    auth = ctx(request).auth
    if form.get("action") == "off":
        await auth.revoke_ics(who.user_id)
        return await back(
            request, who, "/calendar", note="The calendar feed is off; old links no longer work."
        )
    # Shown in this answer only, never put in a URL of ours (history, logs).
    return await _calendar_page(request, who, await auth.new_ics_url(who.user_id))


# --- Devices ---------------------------------------------------------------------------------
@router.get("/devices", response_class=HTMLResponse)
async def devices(request: Request, who: Who) -> HTMLResponse:
    """Pendants: add, revoke, last seen, audio waiting."""
    s = ctx(request).service
    return render(
        request,
        who,
        "devices.html",
        devices=await s.devices.devices(who.user),
        waiting=await s.devices.audio_waiting(who.user),
        new=None,
    )


@router.post("/devices", response_class=HTMLResponse)
async def add_device(request: Request, who: Who) -> Response:
    """Add a pendant and show its token once (with a QR code)."""
    form = await checked_form(request, who)
    s = ctx(request).service
    try:
        device, token = await s.devices.add_device(who.user, form.get("name", ""))
    except ValueError as exc:
        return await back(request, who, "/devices", error=str(exc))
    qr = segno.make(token, error="m").svg_data_uri(scale=4, border=2)
    response = render(
        request,
        who,
        "devices.html",
        devices=await s.devices.devices(who.user),
        waiting=await s.devices.audio_waiting(who.user),
        new={"name": device.name, "token": token, "qr": qr},
    )
    response.headers["Cache-Control"] = "no-store"  # the token is shown once
    return response


@router.post("/devices/{device_id}/revoke")
async def revoke_device(request: Request, who: Who, device_id: RowId) -> Response:
    """Revoke a pendant: its token stops working at once."""
    await checked_form(request, who)
    gone = await ctx(request).service.devices.revoke_device(who.user, device_id)
    if gone is None:
        raise HTTPException(404)
    return await back(
        request, who, "/devices", note=f"Revoked {gone.name}; its token no longer works."
    )


# --- Settings, tokens, export, delete ----------------------------------------------------------
@router.get("/settings", response_class=HTMLResponse)
async def settings(request: Request, who: Who) -> HTMLResponse:
    """Time zone, briefing, quiet hours, channels, API tokens, sign-out."""
    return await _settings_page(request, who)


async def _settings_page(
    request: Request, who: Viewer, *, new_token: str | None = None, link_code: str | None = None
) -> HTMLResponse:
    """The settings page, with a new API token or link code shown once when given."""
    c = ctx(request)
    return render(
        request,
        who,
        "settings.html",
        script="zones.js",
        zones=ZONES.zones(),
        identities=await c.service.settings.identities(who.user),
        link_questions=await c.service.settings.link_questions(who.user),
        tokens=await c.auth.api_tokens(who.user_id),
        new_token=new_token,
        link_code=link_code,
    )


@router.post("/settings")
async def save_settings(request: Request, who: Who) -> Response:
    """Save the schedule settings."""
    form = await checked_form(request, who)
    change = SettingsChange(
        timezone=form.get("timezone") or None,
        briefing_time=form.get("briefing_time") or None,
        briefing_enabled=form.get("briefing_enabled") == "on",
        quiet=form.get("quiet", ""),
        preferred_channel=form.get("preferred_channel") or None,
    )
    await ctx(request).service.settings.change_settings(who.user, change)
    if change.errors:
        return await back(request, who, "/settings", error=" ".join(change.errors))
    zone_words = f" Time zone: {change.found}." if change.found else ""
    return await back(request, who, "/settings", note=f"Settings saved.{zone_words}")


@router.get("/zones")
async def zones(request: Request, who: Who, q: str = "") -> JSONResponse:
    """The time-zone picker's suggestions: towns and zones starting like ``q``."""
    found = await asyncio.to_thread(ZONES.suggest, q[:80])
    return JSONResponse(
        [{"value": s.value, "zone": s.zone} for s in found],
        headers={"Cache-Control": "private, max-age=3600"},
    )


@router.post("/settings/link", response_class=HTMLResponse)
async def link_channel(request: Request, who: Who) -> Response:
    """A code to send from another chat app to link it."""
    await checked_form(request, who)
    code = await ctx(request).service.settings.link_code(who.user)
    return await _settings_page(request, who, link_code=code)


@router.post("/settings/link/{code}/{answer}")
async def answer_link(request: Request, who: Who, code: str, answer: str) -> Response:
    """Yes or No to a chat that sent this user's link code."""
    await checked_form(request, who)
    if answer not in ("yes", "no"):
        raise HTTPException(404)
    said = await ctx(request).service.settings.answer_link(who.user, code, yes=answer == "yes")
    return await back(request, who, "/settings", note=said)


@router.post("/settings/tokens", response_class=HTMLResponse)
async def new_token(request: Request, who: Who) -> Response:
    """Create a personal API token (read-only unless "write" is ticked) and show it once."""
    form = await checked_form(request, who)
    c = ctx(request)
    scope = WRITE if form.get("scope") == WRITE else READ
    _, secret = await c.auth.new_api_token(who.user_id, form.get("name", ""), scope)
    response = await _settings_page(request, who, new_token=secret)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/settings/tokens/{token_id}/revoke")
async def revoke_token(request: Request, who: Who, token_id: RowId) -> Response:
    """Revoke an API token."""
    await checked_form(request, who)
    if not await ctx(request).auth.revoke_api_token(who.user_id, token_id):
        raise HTTPException(404)
    return await back(request, who, "/settings", note="Token revoked.")


@router.post("/signout")
async def sign_out(request: Request, who: Who) -> Response:
    """Sign this browser out, or every browser with ``everywhere``."""
    form = await checked_form(request, who)
    auth = ctx(request).auth
    if form.get("everywhere"):
        await auth.sign_out_everywhere(who.user_id)
    else:
        await auth.sign_out(who.session.id or 0)
    response = RedirectResponse("/signin?out=1", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


@router.get("/export")
async def export(request: Request, who: Who) -> Response:
    """All my data and files as a zip (the one ``lifebot export`` writes)."""
    service = ctx(request).service
    path = await service.data.export_file(who.user)
    return FileResponse(
        path,
        media_type="application/zip",
        filename="lifebot-export.zip",
        headers={"Cache-Control": "no-store"},
        background=BackgroundTask(service.data.forget_export, path),
    )


@router.get("/delete", response_class=HTMLResponse)
async def delete_page(request: Request, who: Who) -> HTMLResponse:
    """Explain what deleting does, and ask to type DELETE."""
    return render(request, who, "delete.html")


@router.post("/delete")
async def delete_everything(request: Request, who: Who) -> Response:
    """Delete the user and all their data, then sign out."""
    form = await checked_form(request, who)
    if form.get("confirm", "").strip().upper() != "DELETE":
        return await back(request, who, "/delete", error="Type DELETE to confirm.")
    await ctx(request).service.data.erase(who.user)
    response = RedirectResponse("/signin?deleted=1", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
