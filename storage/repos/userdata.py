"""All of one user's rows, as JSON-ready dicts: dump, load (same ids) and delete.

The tables are the ones the registered features declare (``Registry.user_tables()``), handed
in by the composition root: storage does not know the features, and a table no feature
declares fails the contract tests instead of silently staying behind. Each such table has a
``user_id`` column, so "everything of a user" is every declared table filtered by it, plus
the user row. Ids are kept on load: references between rows (and the sources memory cites)
stay valid without remapping. Values go through the one typed encoder (``storage.codec``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table, delete, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

import storage.models  # noqa: F401  # registers every table in the metadata
from storage.codec import column_kind, decode, encode
from storage.models import User

USER = "user"
"""The user row's table, dumped first and deleted last."""


def user_tables(names: Iterable[str]) -> list[Table]:
    """The named tables, parents before children; ValueError for a name with no such table."""
    wanted = set(names)
    known = {t.name: t for t in SQLModel.metadata.sorted_tables}
    missing = wanted - set(known)
    if missing:
        raise ValueError(f"declared user tables that do not exist: {sorted(missing)}")
    return [t for t in SQLModel.metadata.sorted_tables if t.name in wanted and t.name != USER]


def columns_of(tables: Iterable[Table]) -> dict[str, dict[str, str]]:
    """``{table: {column: kind}}``: how each column's values are written (for a manifest)."""
    return {t.name: {c.name: column_kind(c) for c in t.columns} for t in tables}


def encode_row(row: Any) -> dict[str, Any]:
    """A result row as JSON-ready data."""
    return {k: encode(v) for k, v in row._mapping.items()}


def decode_rows(
    table: Table, rows: list[dict[str, Any]], kinds: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Rows as ``encode_row`` wrote them, back to the column's Python values.

    Columns the table does not have are dropped; each value is read by its column's kind
    (``kinds``, as a manifest recorded them, else the table's own).
    """
    known = {c.name: column_kind(c) for c in table.columns}
    kinds = {**known, **(kinds or {})}
    return [{k: decode(kinds[k], v) for k, v in row.items() if k in known} for row in rows]


class UserDataRepo:
    """Dump, load and delete everything of one user over the declared tables."""

    def __init__(self, session: AsyncSession, tables: Iterable[str]) -> None:
        self.s = session
        self.tables = user_tables(tables)
        """The declared tables, parents first."""

    @property
    def user_table(self) -> Table:
        """The user row's table."""
        return User.__table__  # type: ignore[attr-defined, no-any-return]  # SQLModel's table

    async def _conn(self) -> AsyncConnection:
        """Core statements run on the session's connection (SQLModel wants ORM selects)."""
        return await self.s.connection()

    async def dump(self, user_id: int) -> dict[str, list[dict[str, Any]]]:
        """``{table name: [row, ...]}`` with the user row under ``user``."""
        conn = await self._conn()
        users = self.user_table
        out: dict[str, list[dict[str, Any]]] = {}
        rows = (await conn.execute(select(users).where(users.c.id == user_id))).all()
        out[USER] = [encode_row(r) for r in rows]
        for table in self.tables:
            q = select(table).where(table.c.user_id == user_id)
            pk = list(table.primary_key.columns)
            if pk:
                q = q.order_by(*pk)
            out[table.name] = [encode_row(r) for r in (await conn.execute(q)).all()]
        return out

    async def load(self, data: dict[str, list[dict[str, Any]]]) -> int:
        """Insert a dump with its ids; raise ValueError naming what already exists.

        Returns the user's id.
        """
        users = data.get(USER) or []
        if len(users) != 1:
            raise ValueError("the export holds no user")
        user_id = int(users[0]["id"])
        if await self.s.get(User, user_id) is not None:
            raise ValueError(
                f"this database already has a user {user_id}: import into a fresh data dir, "
                f"or delete that user first (`lifebot users delete {user_id}`)"
            )
        conn = await self._conn()
        ordered = [self.user_table, *self.tables]
        for table in ordered:
            rows = data.get(table.name) or []
            if table is not self.user_table and any(
                int(r.get("user_id") or user_id) != user_id for r in rows
            ):
                raise ValueError(f"{table.name} holds rows of another user")
            if rows:
                await conn.execute(insert(table), decode_rows(table, rows))
        await bump_sequences(conn, ordered)
        return user_id

    async def delete(self, user_id: int) -> dict[str, int]:
        """Delete every row of the user (children first); ``{table: rows deleted}``."""
        conn = await self._conn()
        counts: dict[str, int] = {}
        for table in reversed(self.tables):
            result = await conn.execute(delete(table).where(table.c.user_id == user_id))
            counts[table.name] = int(getattr(result, "rowcount", 0) or 0)
        users = self.user_table
        result = await conn.execute(delete(users).where(users.c.id == user_id))
        counts[USER] = int(getattr(result, "rowcount", 0) or 0)
        return {k: v for k, v in counts.items() if v}


async def bump_sequences(conn: AsyncConnection, tables: Iterable[Table]) -> None:
    """PostgreSQL: move each integer id's sequence past the ids just inserted by hand."""
    if conn.dialect.name != "postgresql":
        return
    for table in tables:
        col = table.c.get("id")
        if col is None or not col.primary_key or col.type.python_type is not int:
            continue
        top = (await conn.execute(select(func.max(col)))).scalar()
        if top is None:
            continue
        await conn.execute(
            text("SELECT setval(pg_get_serial_sequence(:t, 'id'), :v)"),
            {"t": f'"{table.name}"', "v": int(top)},
        )
