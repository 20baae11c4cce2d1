"""Full-text search: SQLite FTS5 with porter stemming, PostgreSQL tsvector ('english')."""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import MemoryItem
from storage.search.base import Hit, SearchFilter

# Words that carry no topic. Dropping them keeps BM25 from rewarding "what did I ...".
_STOPWORD_TEXT = """a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing done down during each else ever few for
    from further get got had has have having he her here hers herself him himself his how i
    if in into is it its itself just know let me more most my myself no nor not now of off
    on once only or other our ours out over own said same say she should so some such tell
    than that the their theirs them then there these they this those through to too under
    until up us very was we were what when where which while who whom why will with would
    you your yours yourself anything something thing things remember recall go goes going
went gone come comes coming came make makes made take takes took see saw seen want wants
wanted need needs needed think thought also well really yes yeah ok okay"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def fts_terms(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (no stop words, no duplicates, in order)."""
    seen: dict[str, None] = {}
    for raw in _WORD.findall(text.lower()):
        word = raw.split("'")[0]
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


class SqliteFullText:
    """FTS5 over ``memoryitem_fts`` (kept in step with ``memoryitem`` by triggers)."""

    async def search(
        self, session: AsyncSession, terms: Sequence[str], flt: SearchFilter, limit: int
    ) -> list[Hit]:
        """BM25-ranked items matching any term."""
        if not terms:
            return []
        # Each term quoted: FTS5 syntax characters in user text can never break the query.
        match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
        fts = sa.table("memoryitem_fts", sa.column("rowid"))
        rank = sa.func.bm25(sa.literal_column("memoryitem_fts"), 1.0, 0.4)
        stmt = (
            select(col(MemoryItem.id), rank.label("rank"))
            .select_from(fts)
            .join(MemoryItem, col(MemoryItem.id) == fts.c.rowid)
            .where(sa.text("memoryitem_fts MATCH :match").bindparams(match=match), *flt.where())
            .order_by(rank)
            .limit(limit)
        )
        rows = (await session.exec(stmt)).all()
        # bm25() is "lower is better" and negative; flip it so higher is better everywhere.
        return [(int(r[0] or 0), -float(r[1])) for r in rows]


class PostgresFullText:
    """tsvector column ``tsv`` (english stemming) ranked by ts_rank_cd."""

    async def search(
        self, session: AsyncSession, terms: Sequence[str], flt: SearchFilter, limit: int
    ) -> list[Hit]:
        """Items matching any term, best first."""
        words = [re.sub(r"[^\w]", "", t) for t in terms]
        words = [w for w in words if w]
        if not words:
            return []
        # The config must reach the server as regconfig, not as a bound varchar.
        tsq = sa.func.to_tsquery(
            sa.literal_column("'english'::regconfig"), sa.cast(" | ".join(words), sa.Text)
        )
        tsv: sa.ColumnElement[object] = sa.literal_column("memoryitem.tsv")
        rank = sa.func.ts_rank_cd(tsv, tsq)
        stmt = (
            select(col(MemoryItem.id), rank.label("rank"))
            .where(tsv.op("@@")(tsq), *flt.where())
            .order_by(rank.desc(), col(MemoryItem.id).desc())
            .limit(limit)
        )
        rows = (await session.exec(stmt)).all()
        return [(int(r[0] or 0), float(r[1])) for r in rows]
