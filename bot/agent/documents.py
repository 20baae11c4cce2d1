"""Documents people send (PDF): kept with their message, read page by page, searchable by page.

The file goes to the file store (kind ``documents``, key ``<user id>/<message>-<n>-<name>``;
the database on PostgreSQL, so every process has it) and is listed in its message's
``meta["documents"]`` (path, name, pages, searchable chunks). Its text is read with pypdf (in a
bounded child, below), cut into chunks of about ``CHUNK_CHARS`` characters that never cross a
page, stored as ``documentchunk`` rows, and indexed as memory items of kind ``document`` whose
reference is "name p. N", so an answer cites the page. A scanned PDF without a text layer is
kept and the person is told it has no text; a damaged or encrypted one is kept and they are
told it cannot be read.

Reading runs in a bounded child process (``bot.isolated``, ``bot.agent.pdf_text``): at most
``READ_BOUNDS`` of time and memory, at most ``pdf_text.MAX_PAGES`` pages, no part unpacking
to more than ``pdf_text.MAX_STREAM_BYTES``. A document over a limit is refused in words that
name the limit, and nothing of it is stored: the file is written only once its text was read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.agent.memory.index import MemoryIndex
from bot.chat import InputContext, InputOutcome
from bot.feature import Feature, FileKind, Input, Reference
from bot.isolated import Bounds, ChildFailed, OverBound, run_bounded
from bot.messages import Attachment, InboundMessage, file_name
from storage.db import Database
from storage.files import FileStore
from storage.models import DocumentChunk
from storage.repos.messages import MessageRepo
from storage.repos.senses import DocumentRepo

log = logging.getLogger(__name__)

CHUNK_CHARS = 1200
"""About a paragraph or two: small enough for a precise page citation, big enough for context."""
READ_BOUNDS = Bounds(seconds=30.0, memory_bytes=512_000_000, output_bytes=64_000_000)
"""What reading one document may cost: 30 s (a 500-page book takes about 2), 512 MB of
address space for the child (Python and pypdf take about 60), 64 MB of text back."""
READING_AT_ONCE = 2
"""Documents read at the same time (each in its own bounded child)."""
KIND = "documents"
"""The file store's kind for documents."""
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_document(attachment: Attachment) -> bool:
    """A PDF with its bytes fetched."""
    return attachment.kind == "document" and attachment.data is not None


class UnreadableDocument(ValueError):
    """The file is not a PDF pypdf can open (damaged, encrypted): kept, not searchable."""


class RefusedDocument(ValueError):
    """The file is over a limit (pages, unpacked size, time, memory): nothing is kept."""


async def pages_of(data: bytes, bounds: Bounds = READ_BOUNDS) -> list[str]:
    """The text of each page, read in a bounded child process.

    RefusedDocument (over a limit) or UnreadableDocument, in words that finish a sentence.
    """
    try:
        raw = await run_bounded("bot.agent.pdf_text", data, bounds)
    except OverBound as exc:
        raise RefusedDocument(f"{exc.limit}, my limit") from exc
    except ChildFailed as exc:
        log.warning("reading a document failed: %s", exc)
        raise UnreadableDocument("it is not a PDF I can open") from exc
    answer = json.loads(raw)
    if "refused" in answer:
        raise RefusedDocument(str(answer["refused"]))
    if "unreadable" in answer:
        raise UnreadableDocument(str(answer["unreadable"]))
    return [str(page) for page in answer["pages"]]


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
    refused: str | None = None
    """Why it was not kept at all (over a limit), in words that finish "... because ..."."""

    def reply(self) -> str:
        """The words for the person."""
        if self.refused is not None:
            return f"I did not keep {self.name}: {self.refused}. Nothing of it was stored."
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

    def __init__(
        self,
        *,
        db: Database,
        files: FileStore,
        index: MemoryIndex | None,
        bounds: Bounds = READ_BOUNDS,
    ) -> None:
        self.db = db
        self.files = files
        self.index = index
        self.bounds = bounds
        """What reading one document may cost."""
        self._reading = asyncio.Semaphore(READING_AT_ONCE)

    async def keep(self, user_id: int, message_id: int, att: Attachment, n: int) -> ReadDocument:
        """Read one document; store it and index its chunks (nothing when it is refused)."""
        assert att.data is not None
        name = file_name(att.name or "") or "document.pdf"
        rel = f"{int(user_id)}/{int(message_id)}-{n}-{_SAFE.sub('_', name)[-80:]}"
        try:
            async with self._reading:
                pages = await pages_of(att.data, self.bounds)
        except RefusedDocument as exc:
            log.info("document %s of message %s refused: %s", n, message_id, exc)
            return ReadDocument(name, 0, 0, refused=str(exc))
        except UnreadableDocument as exc:
            await self.files.put(KIND, rel, att.data)
            await self._note(user_id, message_id, rel, name, 0, 0)
            return ReadDocument(name, 0, 0, str(exc))
        await self.files.put(KIND, rel, att.data)
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


class DocumentInput:
    """The document feature's handler of documents sent with a message (``Input.DOCUMENT``).

    Keeps and indexes each document and says what was read: as the answer when no words came
    with them, else as a notice while the words go on to the agent.
    """

    kind = Input.DOCUMENT
    before_storing = False

    def __init__(self, documents: Documents) -> None:
        self.documents = documents

    def takes(self, msg: InboundMessage) -> bool:
        """A message with at least one document."""
        return any(is_document(a) for a in msg.attachments)

    async def take(self, ctx: InputContext) -> InputOutcome:
        """Keep and index the documents; tell the person what was read."""
        assert ctx.message_id is not None
        docs = [a for a in ctx.msg.attachments if is_document(a)]
        read = [
            await self.documents.keep(ctx.user_id, ctx.message_id, a, n) for n, a in enumerate(docs)
        ]
        said = "\n".join(r.reply() for r in read)
        if not ctx.msg.text.strip():
            return InputOutcome(reply=said)
        return InputOutcome(notice=said)

    async def again(self, meta: dict[str, Any] | None) -> Sequence[str]:
        """Nothing to show the model again: the documents are found by search."""
        return ()


FEATURE = Feature(
    name="documents",
    about="PDFs people send: kept, read page by page and searchable with page citations.",
    inputs=(Input.DOCUMENT,),
    tables=("documentchunk",),
    files=(
        FileKind(KIND, "PDF files people sent, by user and message", key_ids="{user}/{message}-"),
    ),
    references=(
        Reference("documentchunk", "message_id", target="message"),
        Reference("message", "meta", path=("documents", "*", "path"), template="{user}/{message}-"),
    ),
)
"""Documents' declaration (issue 28)."""
