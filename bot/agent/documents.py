"""Documents people send (PDF): kept with their message, read page by page, searchable by page.

The file goes to the file store (kind ``documents``, key ``<user id>/<message>-<n>-<name>``;
the database on PostgreSQL, so every process has it) and is listed in its message's
``meta["documents"]`` (path, name, pages, searchable chunks). Its text is read with pypdf (off
the event loop), cut into chunks of about ``CHUNK_CHARS`` characters that never cross a page,
stored as ``documentchunk`` rows, and indexed as memory items of kind ``document`` whose
reference is "name p. N", so an answer cites the page. A scanned PDF without a text layer is
kept and the person is told it has no text.
"""

from __future__ import annotations

import asyncio
import io
import logging
import re
from dataclasses import dataclass

from bot.agent.memory.index import MemoryIndex
from bot.feature import Feature, FileKind
from bot.messages import Attachment
from storage.db import Database
from storage.files import FileStore
from storage.models import DocumentChunk
from storage.repos.messages import MessageRepo
from storage.repos.senses import DocumentRepo

log = logging.getLogger(__name__)

CHUNK_CHARS = 1200
"""About a paragraph or two: small enough for a precise page citation, big enough for context."""
MAX_PAGES = 500
KIND = "documents"
"""The file store's kind for documents."""
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_document(attachment: Attachment) -> bool:
    """A PDF with its bytes fetched."""
    return attachment.kind == "document" and attachment.data is not None


class UnreadableDocument(ValueError):
    """The file is not a PDF pypdf can open (damaged, encrypted)."""


def pages_of(data: bytes) -> list[str]:
    """The text of each page (blocking: run it in a thread)."""
    from pypdf import PdfReader  # noqa: PLC0415  (pypdf loads only when a document arrives)
    from pypdf.errors import PdfReadError  # noqa: PLC0415

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UnreadableDocument("it is password-protected")
        return [(page.extract_text() or "") for page in reader.pages[:MAX_PAGES]]
    except PdfReadError as exc:
        raise UnreadableDocument(f"it is not a PDF I can open ({exc})") from exc


def chunks_of(pages: list[str], size: int = CHUNK_CHARS) -> list[tuple[int, str]]:
    """(page number, text) pieces: paragraphs packed up to ``size``, never across a page."""
    out: list[tuple[int, str]] = []
    for number, text in enumerate(pages, start=1):
        words = " ".join(text.split())
        while words:
            if len(words) <= size:
                out.append((number, words))
                break
            cut = words.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            out.append((number, words[:cut].strip()))
            words = words[cut:].strip()
    return out


@dataclass(frozen=True, slots=True)
class ReadDocument:
    """What reading one document gave."""

    name: str
    pages: int
    chunks: int
    problem: str | None = None
    """Why it could not be read, in words that finish "I kept <name>, but ..."."""

    def reply(self) -> str:
        """The words for the person."""
        if self.problem is not None:
            return f"I kept {self.name}, but {self.problem}, so I can't search it."
        if not self.chunks:
            return (
                f"I kept {self.name} ({self.pages} pages), but it has no text layer (a scan?), "
                "so I can't search it."
            )
        return (
            f"I read {self.name} ({self.pages} pages). Ask me about it any time; "
            "I'll cite the page."
        )


class Documents:
    """Keeps, reads and indexes the documents of messages."""

    def __init__(self, *, db: Database, files: FileStore, index: MemoryIndex | None) -> None:
        self.db = db
        self.files = files
        self.index = index

    async def keep(self, user_id: int, message_id: int, att: Attachment, n: int) -> ReadDocument:
        """Store one document, read it and index its chunks."""
        assert att.data is not None
        name = att.name or "document.pdf"
        rel = f"{int(user_id)}/{int(message_id)}-{n}-{_SAFE.sub('_', name)[-80:]}"
        await self.files.put(KIND, rel, att.data)
        try:
            pages = await asyncio.to_thread(pages_of, att.data)
        except UnreadableDocument as exc:
            await self._note(user_id, message_id, rel, name, 0, 0)
            return ReadDocument(name, 0, 0, str(exc))
        pieces = chunks_of(pages)
        async with self.db.session() as s:
            rows = await DocumentRepo(s).add(
                [
                    DocumentChunk(user_id=user_id, message_id=message_id, name=name, page=p, text=t)
                    for p, t in pieces
                ]
            )
            msg = await MessageRepo(s).get(user_id, message_id)
        await self._note(user_id, message_id, rel, name, len(pages), len(pieces))
        if self.index is not None and msg is not None:
            await self.index.put_document_chunks(msg, rows)
        return ReadDocument(name, len(pages), len(pieces))

    async def _note(
        self, user_id: int, message_id: int, rel: str, name: str, pages: int, chunks: int
    ) -> None:
        async with self.db.session() as s:
            row = await MessageRepo(s).get(user_id, message_id)
            listed = list(((row.meta or {}) if row else {}).get("documents") or [])
            listed.append({"path": rel, "name": name, "pages": pages, "chunks": chunks})
            await MessageRepo(s).set_meta(user_id, message_id, documents=listed)


FEATURE = Feature(
    name="documents",
    about="PDFs people send: kept, read page by page and searchable with page citations.",
    tables=("documentchunk",),
    files=(FileKind(KIND, "PDF files people sent, by user and message"),),
)
"""Documents' declaration (issue 28)."""
