"""Uploads from the web page and the API: a PDF or a photo, handed to dispatch like a chat message.

An upload becomes an ``InboundMessage`` on the ``web`` channel (address ``web/web/user:<id>``,
carrying the signed-in user's id, so dispatch needs no channel identity) with the file as its
attachment and the optional note as its text. Dispatch then does what it does for a PDF or a
photo sent on Telegram or Slack: ``Documents`` reads and indexes a PDF page by page, ``Photos``
keeps a picture and describes it with a vision model, a note is answered as a question. What
dispatch says back goes to ``WebChannel`` (``bot/web/channel.py``), which hands it to the request
that is waiting for it.

Before that, the same limits as the chat channels: a file over ``image_max_bytes`` is refused
with the chat's sentence (``bot.adapters.limits.too_big``), and only PDFs and JPEG, PNG, WebP or
GIF pictures are taken, recognised by their first bytes (a browser's content type is not
trusted). A refused file is never stored.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.adapters.limits import too_big
from bot.agent.conversations import Conversations
from bot.clock import Clock
from bot.dispatch import DispatchResult
from bot.messages import Address, Attachment, InboundMessage, OutboundMessage, file_name
from bot.web.channel import CHANNEL, WebChannel
from storage.models import Message, User

log = logging.getLogger(__name__)

MAX_NOTE = 4000
"""The longest note or question sent with a file (characters)."""
KINDS = "a PDF document or a JPEG, PNG, WebP or GIF picture"
"""What an upload may be, in words."""


def sniff(data: bytes) -> tuple[str, str] | None:
    """(attachment kind, MIME type) from a file's first bytes; None for anything else."""
    if b"%PDF-" in data[:1024]:
        return "document", "application/pdf"
    if data.startswith(b"\xff\xd8\xff"):
        return "image", "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image", "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image", "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image", "image/webp"
    return None


def address_of(user_id: int) -> Address:
    """The web conversation of one user."""
    return Address(CHANNEL, CHANNEL, f"user:{user_id}")


def worded(msg: OutboundMessage) -> str:
    """A reply as plain text, its numbered sources under it ("[1] lease.pdf p. 2: ...")."""
    lines = [msg.text]
    for c in msg.citations:
        snippet = " ".join(c.snippet.split())
        snippet = snippet if len(snippet) <= 80 else snippet[:79] + "…"
        lines.append(f"[{c.index}] {c.channel or c.kind}" + (f": {snippet}" if snippet else ""))
    return "\n".join(lines)


@dataclass(slots=True)
class StoredDocument:
    """A PDF kept with an upload."""

    name: str
    pages: int
    """Pages read (0: it could not be opened)."""
    chunks: int
    """Searchable pieces made of its text (0: nothing to search, e.g. a scan)."""


@dataclass(slots=True)
class StoredPhoto:
    """A picture kept with an upload."""

    mime_type: str
    size: int
    """Bytes."""
    described: bool
    """A vision model described it (it is searchable by what it shows)."""
    description: str | None = None
    """What the model saw, when described."""


@dataclass(slots=True)
class UploadOutcome:
    """What became of one upload."""

    stored: bool
    """The file was kept (False: refused, and nothing was stored)."""
    problem: str | None = None
    """Why it was refused: ``too_big``, ``wrong_type``, ``empty``, ``note`` or ``unavailable``."""
    said: list[str] = field(default_factory=list)
    """What lifebot said about it, in order (the refusal when refused)."""
    status: str = "refused"
    """Dispatch's status (``answered``, ``llm_down``, ``command``, ``failed``), or ``refused``."""
    message_id: int | None = None
    """The stored message the file belongs to (its conversation page shows it)."""
    documents: list[StoredDocument] = field(default_factory=list)
    photos: list[StoredPhoto] = field(default_factory=list)


def refused(problem: str, reason: str) -> UploadOutcome:
    """An upload that was not taken: the problem's code and the reason in words."""
    return UploadOutcome(stored=False, problem=problem, said=[reason])


def outcome_of(row: Message) -> tuple[list[StoredDocument], list[StoredPhoto]]:
    """The documents and pictures a stored message lists in its ``meta``."""
    meta: dict[str, Any] = row.meta or {}
    docs = [
        StoredDocument(
            str(d.get("name") or ""), int(d.get("pages") or 0), int(d.get("chunks") or 0)
        )
        for d in meta.get("documents") or []
    ]
    seen = list(meta.get("descriptions") or [])
    photos = []
    for n, e in enumerate(meta.get("images") or []):
        description = str(seen[n].get("description") or "") if n < len(seen) else None
        photos.append(
            StoredPhoto(
                str(e.get("mime_type") or ""),
                int(e.get("size") or 0),
                bool(meta.get("described")) and bool(description),
                description or None,
            )
        )
    return docs, photos


class Uploads:
    """Checks an upload against the chat's limits, then sends it through dispatch."""

    def __init__(
        self,
        conversations: Conversations,
        clock: Clock,
        *,
        max_bytes: int,
        channel: WebChannel,
        dispatch: Callable[[InboundMessage], Awaitable[DispatchResult]],
    ) -> None:
        self.conversations = conversations
        """Where an upload's stored message is read back."""
        self.clock = clock
        self.max_bytes = max_bytes
        """The largest file taken (the ``image_max_bytes`` setting, as on Telegram and Slack)."""
        self.channel = channel
        """The ``web`` adapter among dispatch's channels: what dispatch says comes back here."""
        self.dispatch = dispatch
        """Dispatch's ``handle``."""

    def message(
        self,
        user: User,
        text: str,
        file: tuple[str, bytes] | None = None,
        *,
        pressed: str | None = None,
        prefix: str = "upload",
    ) -> InboundMessage:
        """A message from the signed-in ``user`` on the web channel (checked beforehand).

        ``file``: (name, bytes) of one PDF or picture; ``pressed``: a button's data (then
        ``text`` is its label), as when a button is pressed in a chat.
        """
        assert user.id is not None
        attachments = []
        if file is not None:
            name, data = file
            found = sniff(data)
            assert found is not None  # check() refused anything else
            kind, mime = found
            if kind == "document" and not name.lower().endswith(".pdf"):
                name = f"{name or 'document'}.pdf"
            attachments.append(
                Attachment(kind, mime_type=mime, size=len(data), name=name or None, data=data)
            )
        return InboundMessage(
            address=address_of(user.id),
            sender_id=f"user:{user.id}",
            message_id=f"{prefix}-{secrets.token_hex(8)}",
            text=text.strip(),
            received_at=self.clock.now(),
            sender_name=user.display_name,
            attachments=attachments,
            callback_data=pressed,
            user_id=user.id,
        )

    async def run(self, msg: InboundMessage) -> tuple[DispatchResult, list[OutboundMessage]]:
        """Dispatch ``msg`` and collect what is said in answer (for callers that wait)."""
        listener = self.channel.listen(msg.message_id, msg.address.chat_id)
        try:
            result = await self.dispatch(msg)
        finally:
            self.channel.done(listener)
        return result, listener.said

    def check(self, name: str, data: bytes, size: int | None = None) -> UploadOutcome | None:
        """The refusal of this file (``size``: its full size when ``data`` was cut short)."""
        found = sniff(data)
        what = {"document": "document", "image": "picture"}.get(found[0] if found else "", "file")
        if (problem := too_big(max(size or 0, len(data)), self.max_bytes, what)) is not None:
            return refused("too_big", f"{problem} I kept nothing.")
        if not data:
            return refused("empty", f"{name or 'That file'} is empty. I kept nothing.")
        if found is None:
            return refused(
                "wrong_type",
                f"I can take {KINDS}; {name or 'that file'} is none of those, so I kept nothing.",
            )
        return None

    async def send(
        self, user: User, name: str, data: bytes, note: str = "", *, size: int | None = None
    ) -> UploadOutcome:
        """Check the file, then hand it with ``note`` to dispatch as a message from the web.

        ``size`` is the file's full size when the caller read only the first
        ``max_bytes + 1`` bytes of it (enough to know it is too big).
        """
        assert user.id is not None
        name = file_name(name)
        if (problem := self.check(name, data, size)) is not None:
            return problem
        if len(note) > MAX_NOTE:
            return refused(
                "note", f"The note is too long (at most {MAX_NOTE} characters). I kept nothing."
            )
        msg = self.message(user, note, (name, data))
        result, said = await self.run(msg)
        row = await self.conversations.by_dedupe_key(user.id, msg.dedupe_key)
        if row is None or row.id is None:
            log.warning("an upload of user %s was not stored (%s)", user.id, result.status)
            return refused("unavailable", "I could not keep that file. Please try again.")
        docs, photos = outcome_of(row)
        words = [worded(m) for m in said if m.text.strip()]
        if not words and result.reply:
            words = [result.reply]
        return UploadOutcome(
            stored=True,
            said=words,
            status=result.status,
            message_id=row.id,
            documents=docs,
            photos=photos,
        )

    async def get(self, user: User, message_id: int) -> UploadOutcome | None:
        """One of the user's uploads as stored; None when it is not theirs or no upload."""
        assert user.id is not None
        row = await self.conversations.message(user.id, message_id)
        if row is None or row.id is None or row.channel != CHANNEL or row.direction != "in":
            return None
        docs, photos = outcome_of(row)
        if not docs and not photos:
            return None
        return UploadOutcome(
            stored=True, status=row.status, message_id=row.id, documents=docs, photos=photos
        )
