"""All of one user's rows, as plain JSON-ready dicts: dump, load (same ids) and delete.

Every table that holds personal data has a ``user_id`` column, so "everything of a user" is
every such table filtered by it, plus the user row. Ids are kept on load: references between
rows (and the sources memory cites) stay valid without remapping.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, func, insert, select, text
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

import storage.models  # noqa: F401  # registers every table in the metadata
from storage.models import User

SKIPPED = {"pairingrequest"}
"""Transient rows that mean nothing outside the running instance (codes expire in an hour)."""


def user_tables() -> list[Table]:
    """Tables with a ``user_id`` column, parents before children."""
    return [
        t for t in SQLModel.metadata.sorted_tables if "user_id" in t.c and t.name not in SKIPPED
    ]


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$b64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        if "$dt" in value:
            return datetime.fromisoformat(value["$dt"])
        if "$b64" in value:
            return base64.b64decode(value["$b64"])
    return value


class UserDataRepo:
    """Dump, load and delete everything of one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def _execute(self, statement: Any, params: Any = None) -> Any:
        """Core statements run on the session's connection (SQLModel wants ORM selects)."""
        conn = await self.s.connection()
        return await conn.execute(statement, params)

    async def dump(self, user_id: int) -> dict[str, list[dict[str, Any]]]:
        """``{table name: [row, ...]}`` with the user row under ``user``."""
        user_table = User.__table__  # type: ignore[attr-defined]  # SQLModel's table
        out: dict[str, list[dict[str, Any]]] = {}
        rows = (await self._execute(select(user_table).where(user_table.c.id == user_id))).all()
        out["user"] = [{k: _to_json(v) for k, v in r._mapping.items()} for r in rows]
        for table in user_tables():
            q = select(table).where(table.c.user_id == user_id)
            if "id" in table.c:
                q = q.order_by(table.c.id)
            rows = (await self._execute(q)).all()
            out[table.name] = [{k: _to_json(v) for k, v in r._mapping.items()} for r in rows]
        return out

    async def load(self, data: dict[str, list[dict[str, Any]]]) -> int:
        """Insert a dump with its ids; raise ValueError naming what already exists.

        Returns the user's id.
        """
        users = data.get("user") or []
        if len(users) != 1:
            raise ValueError("the export holds no user")
        user_id = int(users[0]["id"])
        if await self.s.get(User, user_id) is not None:
            raise ValueError(
                f"this database already has a user {user_id}: import into a fresh data dir, "
                f"or delete that user first (`lifebot users delete {user_id}`)"
            )
        user_table = User.__table__  # type: ignore[attr-defined]  # SQLModel's table
        ordered = [user_table, *user_tables()]
        for table in ordered:
            rows = data.get(table.name) or []
            if not rows:
                continue
            known = set(table.c.keys())
            values = [{k: _from_json(v) for k, v in row.items() if k in known} for row in rows]
            await self._execute(insert(table), values)
        await self._bump_sequences(ordered)
        return user_id

    async def _bump_sequences(self, tables: list[Table]) -> None:
        """PostgreSQL: move each id sequence past the ids just inserted."""
        conn = await self.s.connection()
        if conn.dialect.name != "postgresql":
            return
        for table in tables:
            col = table.c.get("id")
            if col is None or not col.primary_key or col.type.python_type is not int:
                continue
            top = (await self._execute(select(func.max(col)))).scalar()
            if top is None:
                continue
            await self._execute(
                text("SELECT setval(pg_get_serial_sequence(:t, 'id'), :v)"),
                {"t": table.name, "v": int(top)},
            )

    async def delete(self, user_id: int) -> dict[str, int]:
        """Delete every row of the user (children first); ``{table: rows deleted}``."""
        counts: dict[str, int] = {}
        for table in [*reversed(user_tables()), *_skipped_tables()]:
            result = await self._execute(delete(table).where(table.c.user_id == user_id))
            counts[table.name] = int(getattr(result, "rowcount", 0) or 0)
        user_table = User.__table__  # type: ignore[attr-defined]  # SQLModel's table
        result = await self._execute(delete(user_table).where(user_table.c.id == user_id))
        counts["user"] = int(getattr(result, "rowcount", 0) or 0)
        return {k: v for k, v in counts.items() if v}


def _skipped_tables() -> list[Table]:
    return [t for t in SQLModel.metadata.sorted_tables if t.name in SKIPPED]
