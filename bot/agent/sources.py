"""Numbered sources: what search tools show the model, and the citations an answer keeps.

One ledger per turn numbers every source the tools showed ([1], [2], ...), the same source
always under the same number; after the turn, the numbers the answer actually cites become
the reply's citations. Numbers the model made up are dropped from the text.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.messages import Citation
from storage.db import Database
from storage.models import MemoryItem
from storage.repos.memory_index import MemoryIndexRepo
from storage.repos.messages import MessageRepo

_CITE = re.compile(r"\[(\d{1,3})\]")


def citation_kind(item: MemoryItem) -> str:
    """``transcript`` for overheard speech, else the item's kind."""
    return "transcript" if item.kind == "message" and item.channel == "device" else item.kind


def describe(item: MemoryItem, tz: ZoneInfo) -> str:
    """One line saying when, where and who: "Sat 08 Jun 2024 11:30 · telegram · Ana"."""
    when = item.ts.astimezone(tz)
    parts = [f"{when:%a %d %b %Y %H:%M}"]
    if item.kind == "episode" and item.ts_end is not None:
        parts[0] += f"-{item.ts_end.astimezone(tz):%H:%M}"
    kind = citation_kind(item)
    if kind != "message":
        parts.append(kind)
    if item.channel:
        parts.append(item.channel)
    if item.kind == "message":
        parts.append(item.speaker or "me")
    if item.kind == "document":
        parts.append(item.ref)
    return " · ".join(parts)


class SourceLedger:
    """The sources shown to the model during one turn."""

    def __init__(self) -> None:
        self.entries: dict[int, Citation] = {}
        self._keys: dict[tuple[str, int | str], int] = {}

    def add(self, item: MemoryItem, link: str | None = None) -> int:
        """The number of this source (a new one, or the one it already has)."""
        key = (item.kind, item.source_id)
        if key in self._keys:
            return self._keys[key]
        n = len(self.entries) + 1
        snippet = item.text if len(item.text) <= 200 else item.text[:197] + "..."
        self.entries[n] = Citation(
            index=n,
            kind=citation_kind(item),
            source_id=str(item.source_id),
            # A document is cited by its page ("report.pdf p. 3"), where channels print a place.
            channel=(item.ref if item.kind == "document" else item.channel) or None,
            ts=item.ts,
            snippet=snippet,
            link=link,
        )
        self._keys[key] = n
        return n

    def add_web(self, url: str, title: str, snippet: str) -> int:
        """The number of a web page (kind ``web``, its URL as the link), apart from memory."""
        key = ("web", url)
        if key in self._keys:
            return self._keys[key]
        n = len(self.entries) + 1
        text = f"{title}: {snippet}" if snippet else title
        self.entries[n] = Citation(
            index=n,
            kind="web",
            source_id=url,
            snippet=text if len(text) <= 200 else text[:197] + "...",
            link=url,
        )
        self._keys[key] = n
        return n

    def cited(self, text: str) -> list[dict[str, Any]]:
        """Citations for the numbers ``text`` cites, in order of first use."""
        seen: list[int] = []
        for m in _CITE.finditer(text):
            n = int(m.group(1))
            if n in self.entries and n not in seen:
                seen.append(n)
        # JSON-able for Message.citations; dispatch turns them back with Citation.from_dict.
        return [self.entries[n].to_dict() for n in seen]

    def strip_unknown(self, text: str) -> str:
        """Remove citation numbers that no tool gave (an invented source is no source)."""
        if not self.entries:
            return _CITE.sub("", text).replace(" .", ".") if _CITE.search(text) else text
        return _CITE.sub(lambda m: m.group(0) if int(m.group(1)) in self.entries else "", text)


def render_sources(citations: list[dict[str, Any]], tz: ZoneInfo) -> str:
    """Citations as a compact list for "why?" and /sources."""
    lines = []
    for c in citations:
        ts = c.get("ts")
        when = ""
        if ts is not None:
            # Citations read back from the database hold ISO strings.
            dt = ts if isinstance(ts, datetime) else datetime.fromisoformat(str(ts))
            when = f"{dt.astimezone(tz):%a %d %b %Y %H:%M} "
        where = f"{c.get('channel')} " if c.get("channel") else ""
        kind = c.get("kind", "message")
        link = f" {c['link']}" if c.get("link") else ""
        lines.append(f"[{c.get('index')}] {when}{where}({kind}): {c.get('snippet', '')}{link}")
    return "\n".join(lines)


async def last_answer_citations(
    session: AsyncSession, user_id: int, conversation_id: int
) -> list[dict[str, Any]] | None:
    """Citations of the last real answer in a conversation (None: there is none).

    Replies to commands and to "why?" itself are skipped, so asking twice shows the same.
    """
    from bot.agent.router import Route, route_by_rules  # noqa: PLC0415  (router imports llm)

    for answer, asked in await MessageRepo(session).recent_answers(user_id, conversation_id):
        if asked.strip().startswith("/") or route_by_rules(asked) is Route.WHY:
            continue
        return answer.citations or []
    return None


async def source_ids(db: Database, user_id: int, items: list[MemoryItem]) -> list[list[str]]:
    """For each item, the ids of the messages it rests on, as people know them.

    A message rests on itself (its import or channel id); an episode or a fact on its source
    messages, so every hit can be checked against what was actually said.
    """
    async with db.session() as s:
        return await MemoryIndexRepo(s).source_ids(user_id, items)
