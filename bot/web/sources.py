"""The sources of an answer as the web page shows them: words, and the page that opens each.

A citation names its source by kind and id (``message`` 12, ``document`` piece 7, ``fact`` 3,
a ``web`` page's URL); the page opens a message at its turn in the conversation, a document
at the message it came with, a fact on the Facts page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from bot.agent.memory.views import MemoryViews
from bot.messages import Citation


@dataclass(frozen=True, slots=True)
class SourceView:
    """One source of an answer, as the page shows it: ``[1] Tue 04 Mar 10:00 · telegram …``."""

    index: int
    label: str
    href: str | None
    """The page that opens it (the conversation at the cited turn); a web page's own URL."""
    external: bool = False
    """``href`` leaves lifebot (a web search result)."""


_PAGES = {
    "fact": "/facts#fact-{n}",
    "episode": "/memory/episode/{n}",
    "journal": "/journal#entry-{n}",
}
"""Kinds with a page of their own; the others open a message at its turn."""


def source_link(kind: str, source_id: str, chunks: dict[int, int]) -> tuple[str | None, bool]:
    """(the page that opens a cited source, whether it leaves lifebot).

    ``chunks`` maps document piece ids to the message their document came with: a document
    is opened at the turn it was sent in.
    """
    if kind == "web":
        ok = source_id.startswith(("https://", "http://"))
        return (source_id if ok else None), ok
    n = int(source_id) if source_id.isdigit() else 0
    if kind == "document":
        n = chunks.get(n, 0)
    if not n:
        return None, False
    page = _PAGES.get(kind, "/memory/message/{n}#m{n}")  # message, transcript, image, document
    return page.format(n=n), False


def source_label(c: Citation, tz: ZoneInfo) -> str:
    """A source in words: when, where, and the start of what it says."""
    parts = []
    if c.ts is not None:
        parts.append(f"{c.ts.astimezone(tz):%a %d %b %Y %H:%M}")
    parts.append(c.channel or c.kind)
    snippet = " ".join(c.snippet.split())
    head = " · ".join(parts)
    return f"{head}: {snippet[:119] + '…' if len(snippet) > 120 else snippet}" if snippet else head


async def source_views(
    memory: MemoryViews, user_id: int, citations: Sequence[Citation], tz: ZoneInfo
) -> list[SourceView]:
    """The page's view of an answer's citations (a document's pieces looked up once)."""
    pieces = [int(c.source_id) for c in citations if c.kind == "document" and c.source_id.isdigit()]
    chunks = await memory.chunk_messages(user_id, pieces)
    out = []
    for c in citations:
        href, external = source_link(c.kind, c.source_id, chunks)
        out.append(SourceView(c.index, source_label(c, tz), href, external))
    return out
