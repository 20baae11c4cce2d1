"""The search index rows (``memoryitem``): what is indexed, its text, its vector."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import col, delete, select, update
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import ChannelIdentity, Episode, Fact, MemoryItem, Message, User
from storage.repos._conn import connection_of
from storage.repos._upsert import dialect_insert
from storage.search.base import SearchFilter

_ITEM_COLUMNS = (
    "user_id",
    "kind",
    "source_id",
    "ts",
    "ts_end",
    "conversation_id",
    "channel",
    "speaker",
    "ref",
    "text",
    "hidden",
)


def indexable_message() -> list[Any]:
    """Which messages are memory: what a person said or heard, never lifebot's own words.

    Inbound user messages and device transcripts count; replies, tool traffic, slash
    commands and strangers' refused messages do not.
    """
    return [
        col(Message.user_id).is_not(None),
        col(Message.text) != "",
        col(Message.status) != "refused",
        col(Message.role) == "user",
        sa.or_(col(Message.direction) == "in", col(Message.channel) == "device"),
        sa.not_(col(Message.text).startswith("/")),
    ]


OWN_SPEAKERS = frozenset({"", "me", "ambient"})
"""Speakers of the user's own messages: chat and voice notes (""), "me", device transcripts."""
WORN_SPEAKERS = frozenset({"pendant"})
"""Transcripts of a device the user wears (``bot/device/hub.py``): the user's own days."""


def embed_text(kind: str, speaker: str, text: str) -> str:
    """What gets embedded for an item: other people's messages carry their name."""
    if kind == "message" and speaker.lower() not in OWN_SPEAKERS:
        return f"{speaker}: {text}"
    return text


_ADD: dict[str, Any] = {}


def _add_statement(dialect: str) -> Any:
    """INSERT ... ON CONFLICT (kind, source_id) DO NOTHING on the index, built once."""
    stmt = _ADD.get(dialect)
    if stmt is None:
        table = MemoryItem.__table__  # type: ignore[attr-defined]
        insert = dialect_insert(dialect, table)
        stmt = _ADD[dialect] = insert.on_conflict_do_nothing(index_elements=["kind", "source_id"])
    return stmt


MessageColumns = sa.Row[Any]
"""A message read as the columns its index row is made of (``id``, ``text``, ``meta``...)."""


def _meta_text(key: str) -> Any:
    """A message's ``meta[key]`` as text ('' when absent or empty), in SQL."""
    return sa.func.coalesce(sa.cast(col(Message.meta)[key].as_string(), sa.String), "")


def _first_said(*values: Any) -> Any:
    """The first of ``values`` that is not empty (SQL's ``a or b or c`` on text)."""
    return sa.func.coalesce(*(sa.func.nullif(v, "") for v in values[:-1]), values[-1])


_INDEX_FROM_MESSAGES: dict[str, Any] = {}


def _index_statement(dialect: str) -> Any:
    """INSERT INTO memoryitem ... SELECT ... FROM message ... RETURNING, built once.

    The turn hook's index row in one statement: the same columns ``message_row`` makes in
    Python (speaker from the meta's speaker or sender name, "ambient" for a device; the
    reference from the meta's import id, the channel's id, else the row id), for the given
    messages that are memory, skipping those already indexed; the new rows come back.
    """
    stmt = _INDEX_FROM_MESSAGES.get(dialect)
    if stmt is None:
        items = MemoryItem.__table__  # type: ignore[attr-defined]
        device = sa.case((col(Message.channel) == "device", "ambient"), else_="")
        rows = sa.select(
            col(Message.user_id),
            sa.literal("message"),
            col(Message.id),
            col(Message.created_at),
            sa.null(),
            col(Message.conversation_id),
            sa.func.coalesce(col(Message.channel), ""),
            _first_said(_meta_text("speaker"), _meta_text("sender_name"), device),
            _first_said(
                _meta_text("import_id"),
                sa.func.coalesce(col(Message.external_id), ""),
                sa.cast(col(Message.id), sa.String),
            ),
            col(Message.text),
            sa.false(),
        ).where(
            col(Message.user_id) == sa.bindparam("user_id"),
            col(Message.id).in_(sa.bindparam("ids", expanding=True)),
            *indexable_message(),
        )
        stmt = _INDEX_FROM_MESSAGES[dialect] = (
            dialect_insert(dialect, items)
            .from_select(list(_ITEM_COLUMNS), rows)
            .on_conflict_do_nothing(index_elements=["kind", "source_id"])
            .returning(items.c.id, items.c.text, items.c.speaker)
        )
    return stmt


class MemoryIndexRepo:
    """Reads and writes index rows; every read that returns content takes a user id."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def source_ids(self, user_id: int, items: Sequence[MemoryItem]) -> list[list[str]]:
        """For each item, the people-facing ids of the messages it rests on (see sources.py)."""
        wanted: dict[int, list[int]] = {}
        for n, item in enumerate(items):
            if item.kind == "message":
                wanted[n] = [item.source_id]
                continue
            row: Episode | Fact | None = (
                await self.s.get(Episode, item.source_id)
                if item.kind == "episode"
                else await self.s.get(Fact, item.source_id)
            )
            ok = row is not None and row.user_id == user_id
            wanted[n] = list(row.source_message_ids or []) if ok and row is not None else []
        every = sorted({m for ids in wanted.values() for m in ids})
        rows = (
            (
                await self.s.exec(
                    select(Message).where(Message.user_id == user_id, col(Message.id).in_(every))
                )
            ).all()
            if every
            else []
        )
        known = {r.id: str((r.meta or {}).get("import_id") or r.external_id or r.id) for r in rows}
        return [[known[m] for m in wanted[n] if m in known] for n in range(len(items))]

    async def unindexed_messages(self, limit: int, user_id: int | None = None) -> list[Message]:
        """Memory-worthy messages that have no index row yet, oldest first."""
        item = sa.orm.aliased(MemoryItem)
        q = (
            select(Message)
            .outerjoin(
                item,
                sa.and_(col(item.kind) == "message", col(item.source_id) == col(Message.id)),
            )
            .where(col(item.id).is_(None), *indexable_message())
            .order_by(col(Message.id))
            .limit(limit)
        )
        if user_id is not None:
            q = q.where(Message.user_id == user_id)
        return list((await self.s.exec(q)).all())

    async def index_from_messages(
        self, user_id: int, message_ids: Sequence[int]
    ) -> list[tuple[int, str, str]]:
        """Index those of these messages that are memory and not indexed yet, in one statement.

        Returns (item id, text, speaker) of each new row; a message already indexed (by the
        background pass) is left alone and not returned.
        """
        if not message_ids:
            return []
        conn = await connection_of(self.s)
        params = {"user_id": user_id, "ids": list(message_ids)}
        rows = (await conn.execute(_index_statement(conn.dialect.name), params)).all()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def unembedded_messages(
        self, user_id: int, message_ids: Sequence[int], model: str, *, kind: str = "message"
    ) -> list[tuple[int, int, str]]:
        """(item id, user id, text to embed) of these messages' rows lacking a ``model`` vector.

        Found through the (kind, source id) key: no scan of the user's other items. ``kind``
        names other sources the same way (``episode``, ``fact``, ``image``, ``document``
        with their own ids).
        """
        q = sa.select(
            col(MemoryItem.id), col(MemoryItem.text), col(MemoryItem.kind), col(MemoryItem.speaker)
        ).where(
            col(MemoryItem.kind) == kind,
            col(MemoryItem.source_id).in_(list(message_ids)),
            col(MemoryItem.user_id) == user_id,
            sa.or_(
                col(MemoryItem.embedding).is_(None),
                col(MemoryItem.embed_model).is_(None),
                col(MemoryItem.embed_model) != model,
            ),
        )
        conn = await connection_of(self.s)
        return [
            (int(r[0] or 0), user_id, embed_text(str(r[2]), str(r[3]), str(r[1])))
            for r in (await conn.execute(q)).all()
        ]

    async def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert index rows; a row whose (kind, source_id) exists already is left alone."""
        if not rows:
            return
        chunk = [{k: r.get(k) for k in _ITEM_COLUMNS} for r in rows]
        for r in chunk:
            r["hidden"] = bool(r["hidden"])
            for k in ("channel", "speaker", "ref", "text"):
                r[k] = r[k] or ""
        # One compiled statement run for many parameter sets: a multi-row VALUES clause is
        # compiled anew for every chunk, which cost more than the inserts themselves.
        conn = await connection_of(self.s)
        await conn.execute(_add_statement(conn.dialect.name), chunk)

    async def upsert(self, row: dict[str, Any]) -> MemoryItem:
        """Insert or update the index row of one source (episodes and facts change text)."""
        existing = await self.by_source(row["kind"], row["source_id"])
        if existing is None:
            await self.add([row])
            existing = await self.by_source(row["kind"], row["source_id"])
            assert existing is not None
            return existing
        changed = existing.text != row.get("text", existing.text)
        for key in ("ts", "ts_end", "speaker", "text", "channel", "ref"):
            if key in row and row[key] is not None:
                setattr(existing, key, row[key])
        if changed:
            existing.embedding = None
            existing.embed_model = None
        self.s.add(existing)
        await self.s.flush()
        return existing

    async def by_source(self, kind: str, source_id: int) -> MemoryItem | None:
        """The index row of one message, episode or fact."""
        res = await self.s.exec(
            select(MemoryItem).where(MemoryItem.kind == kind, MemoryItem.source_id == source_id)
        )
        return res.first()

    async def delete_source(self, user_id: int, kind: str, source_id: int) -> None:
        """Remove a source from the index (a forgotten or superseded fact)."""
        await self.s.exec(
            delete(MemoryItem).where(
                col(MemoryItem.user_id) == user_id,
                col(MemoryItem.kind) == kind,
                col(MemoryItem.source_id) == source_id,
            )
        )

    async def missing_embeddings(
        self,
        model: str,
        limit: int,
        user_id: int | None = None,
        *,
        settled_before: datetime | None = None,
    ) -> list[tuple[int, int, str]]:
        """(item id, user id, text to embed) of rows without a vector of ``model``.

        Another person's message is embedded as "Name: text", so who said it counts too.
        ``settled_before``: episodes whose last line is newer (still growing) are left out.
        """
        q = (
            sa.select(
                col(MemoryItem.id),
                col(MemoryItem.user_id),
                col(MemoryItem.text),
                col(MemoryItem.kind),
                col(MemoryItem.speaker),
            )
            .where(
                sa.or_(
                    col(MemoryItem.embedding).is_(None),
                    col(MemoryItem.embed_model).is_(None),
                    col(MemoryItem.embed_model) != model,
                )
            )
            .order_by(col(MemoryItem.id))
            .limit(limit)
        )
        if user_id is not None:
            q = q.where(col(MemoryItem.user_id) == user_id)
        if settled_before is not None:
            q = q.where(
                sa.or_(
                    col(MemoryItem.kind) != "episode",
                    col(MemoryItem.ts_end).is_(None),
                    col(MemoryItem.ts_end) <= settled_before,
                )
            )
        conn = await connection_of(self.s)
        return [
            (int(r[0] or 0), int(r[1]), embed_text(str(r[3]), str(r[4]), str(r[2])))
            for r in (await conn.execute(q)).all()
        ]

    async def set_embeddings(self, pairs: Sequence[tuple[int, bytes]], model: str) -> None:
        """Store vectors (float32 bytes) for items."""
        conn = await connection_of(self.s)
        stmt = (
            sa.update(MemoryItem)
            .where(col(MemoryItem.id) == sa.bindparam("item_id"))
            .values(embedding=sa.bindparam("blob"), embed_model=model)
        )
        if pairs:
            await conn.execute(stmt, [{"item_id": i, "blob": b} for i, b in pairs])

    async def clear_embeddings(self, user_id: int | None = None) -> None:
        """Forget every vector (``memory reindex`` embeds everything again)."""
        stmt = update(MemoryItem).values(embedding=None, embed_model=None)
        if user_id is not None:
            stmt = stmt.where(col(MemoryItem.user_id) == user_id)
        await self.s.exec(stmt)

    async def hide_messages(self, user_id: int, message_ids: Sequence[int]) -> list[int]:
        """Hide these messages from retrieval; returns the affected item ids."""
        rows = (
            await self.s.exec(
                select(MemoryItem).where(
                    MemoryItem.user_id == user_id,
                    MemoryItem.kind == "message",
                    col(MemoryItem.source_id).in_(list(message_ids)),
                )
            )
        ).all()
        for row in rows:
            row.hidden = True
            self.s.add(row)
        return [r.id for r in rows if r.id is not None]

    async def get_many(
        self, user_id: int, ids: Sequence[int], *, vectors: bool = True
    ) -> dict[int, MemoryItem]:
        """Items by id, only this user's, only visible ones.

        ``vectors=False`` leaves the embedding out (reading it raises): search keeps every
        vector in memory already, and decoding the stored copies cost milliseconds a query.
        """
        if not ids:
            return {}
        q = select(MemoryItem).where(
            MemoryItem.user_id == user_id,
            col(MemoryItem.id).in_(list(ids)),
            col(MemoryItem.hidden).is_(False),
        )
        if not vectors:
            q = q.options(sa.orm.defer(MemoryItem.embedding, raiseload=True))  # type: ignore[arg-type]
        rows = (await self.s.exec(q)).all()
        return {r.id: r for r in rows if r.id is not None}

    async def newest(self, flt: SearchFilter, limit: int) -> list[MemoryItem]:
        """The newest items inside the filter (recency questions ignore similarity)."""
        q = (
            select(MemoryItem)
            .where(*flt.where())
            .order_by(col(MemoryItem.ts).desc(), col(MemoryItem.id).desc())
            .limit(limit)
        )
        return list((await self.s.exec(q)).all())

    async def in_window(
        self, user_id: int, start: datetime, end: datetime, kinds: Sequence[str], limit: int
    ) -> list[MemoryItem]:
        """Items inside a time window, oldest first."""
        flt = SearchFilter(user_id, start, end, tuple(kinds))
        q = (
            select(MemoryItem)
            .where(*flt.where())
            .order_by(col(MemoryItem.ts), col(MemoryItem.id))
            .limit(limit)
        )
        return list((await self.s.exec(q)).all())

    async def own_speakers(self, user_id: int) -> frozenset[str]:
        """Lower-cased speakers whose lines are the user's own, by identity.

        The fixed ones (chat, voice notes, "me", device and pendant transcripts) and the
        names the user goes by: their display name and their channel identities' names, as
        an imported chat history writes them.
        """
        names = set(OWN_SPEAKERS | WORN_SPEAKERS)
        user = await self.s.get(User, user_id)
        if user is not None and user.display_name.strip():
            names.add(user.display_name.strip().lower())
        rows = await self.s.exec(select(ChannelIdentity).where(ChannelIdentity.user_id == user_id))
        names.update(i.display_name.strip().lower() for i in rows.all() if i.display_name)
        return frozenset(names)

    async def own_lines(
        self, user_id: int, start: datetime, end: datetime, limit: int
    ) -> list[MemoryItem]:
        """The user's own messages (see ``own_speakers``) and journal in a window, oldest first."""
        speakers = await self.own_speakers(user_id)
        flt = SearchFilter(user_id, start, end, ("message", "journal"))
        q = (
            select(MemoryItem)
            .where(
                *flt.where(),
                sa.or_(
                    col(MemoryItem.kind) == "journal",
                    sa.func.lower(col(MemoryItem.speaker)).in_(sorted(speakers)),
                ),
            )
            .order_by(col(MemoryItem.ts), col(MemoryItem.id))
            .limit(limit)
        )
        return list((await self.s.exec(q)).all())

    async def neighbours(self, item: MemoryItem, before: int, after: int) -> list[MemoryItem]:
        """Messages around ``item`` in its conversation (the turns that give it context)."""
        if item.kind != "message" or item.conversation_id is None:
            return []
        base: list[Any] = [
            MemoryItem.user_id == item.user_id,
            MemoryItem.kind == "message",
            MemoryItem.conversation_id == item.conversation_id,
            col(MemoryItem.hidden).is_(False),
        ]
        prev = (
            await self.s.exec(
                select(MemoryItem)
                .where(*base, col(MemoryItem.ts) <= item.ts, MemoryItem.id != item.id)
                .order_by(col(MemoryItem.ts).desc(), col(MemoryItem.id).desc())
                .limit(before)
            )
        ).all()
        nxt = (
            await self.s.exec(
                select(MemoryItem)
                .where(*base, col(MemoryItem.ts) >= item.ts, MemoryItem.id != item.id)
                .order_by(col(MemoryItem.ts), col(MemoryItem.id))
                .limit(after)
            )
        ).all()
        return [*reversed(prev), *nxt]

    async def count_unindexed(self, user_id: int | None = None) -> int:
        """How many memory-worthy messages have no index row yet."""
        item = sa.orm.aliased(MemoryItem)
        q = (
            select(sa.func.count())
            .select_from(Message)
            .outerjoin(
                item,
                sa.and_(col(item.kind) == "message", col(item.source_id) == col(Message.id)),
            )
            .where(col(item.id).is_(None), *indexable_message())
        )
        if user_id is not None:
            q = q.where(Message.user_id == user_id)
        return int((await self.s.exec(q)).one())

    async def count_by_kind(self, user_id: int | None, model: str) -> dict[str, tuple[int, int]]:
        """Kind -> (items indexed, items still without a vector of ``model``)."""
        waiting = sa.case(
            (
                sa.or_(
                    col(MemoryItem.embedding).is_(None),
                    col(MemoryItem.embed_model).is_(None),
                    col(MemoryItem.embed_model) != model,
                ),
                1,
            ),
            else_=0,
        )
        q = sa.select(col(MemoryItem.kind), sa.func.count(), sa.func.sum(waiting)).group_by(
            col(MemoryItem.kind)
        )
        if user_id is not None:
            q = q.where(col(MemoryItem.user_id) == user_id)
        conn = await connection_of(self.s)
        return {str(k): (int(n), int(w or 0)) for k, n, w in (await conn.execute(q)).all()}

    async def count(self, user_id: int | None) -> int:
        """How many items one user (or everyone, for None) has indexed."""
        q = select(sa.func.count()).select_from(MemoryItem)
        if user_id is not None:
            q = q.where(MemoryItem.user_id == user_id)
        res = await self.s.exec(q)
        return int(res.one())
