"""All of one user's rows, as JSON-ready dicts: dump, load (new ids) and delete.

The tables are the ones the registered features declare (``Registry.user_tables()``), handed
in by the composition root: storage does not know the features, and a table no feature
declares fails the contract tests instead of silently staying behind. Each such table has a
``user_id`` column, so "everything of a user" is every declared table filtered by it, plus
the user row. A load gives every row a new id and rewrites every reference to it
(``storage.remap``), so a person's data goes into a database that holds other people; what
would make two people one (an identity, a device, a name already there) is refused first.
Values go through the one typed encoder (``storage.codec``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Index, Table, UniqueConstraint, delete, func, insert, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

import storage.models  # noqa: F401  # registers every table in the metadata
from bot.feature import Reference
from storage.codec import column_kind, decode, encode
from storage.models import User
from storage.remap import IdMap, Remapper, allocate, int_id_column
from storage.repos._conn import connection_of

USER = "user"
"""The user row's table, dumped first and deleted last."""

_SECRET_COLUMN = ("hash", "token", "secret", "csrf")
"""Columns whose values a refusal never echoes (it names the column only)."""


class ImportConflict(ValueError):
    """The import would make two people one, or take what another already has.

    Nothing was imported; the message names the conflict.
    """


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
    out = []
    for row in rows:
        try:
            out.append({k: decode(kinds[k], v) for k, v in row.items() if k in known})
        except (TypeError, ValueError, ArithmeticError) as exc:  # a hand-edited export
            raise ValueError(f"{table.name}: a value is not what its column holds ({exc})") from exc
    return out


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
        return await connection_of(self.s)

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

    async def load_new(
        self,
        data: dict[str, list[dict[str, Any]]],
        references: Sequence[Reference] = (),
        *,
        name: str | None = None,
    ) -> tuple[int, IdMap]:
        """Insert a dump with new ids, every reference rewritten; (new user id, the id map).

        ``name``: the user's name here instead of the exported one. ValueError when the dump
        is not one user's; ImportConflict (naming it) when the
        database already has something that is only ever one person's (an identity, a
        device's name, a user's name) or any other value that must be unique. The caller's
        transaction holds it all: on an error, nothing of it stays.
        """
        users = data.get(USER) or []
        if len(users) != 1:
            raise ValueError("the export holds no user")
        old_user = users[0]["id"]
        if type(old_user) is not int:
            raise ValueError("the user's id is not a number")
        for table in self.tables:
            rows_in = data.get(table.name) or []
            # Exactly hers: a row of no one (0, null, missing) would outlive `users delete`.
            if any(type(r.get("user_id")) is not int or r["user_id"] != old_user for r in rows_in):
                raise ValueError(f"{table.name} holds rows of another user, or of no one")
            if int_id_column(table) and any(type(r.get("id")) is not int for r in rows_in):
                raise ValueError(f"{table.name} holds a row whose id is not a number")
            _refuse_kept_ids_elsewhere(table, rows_in, data)
        if name is not None and name.strip():
            users = [{**users[0], "display_name": name.strip()}]
        name = str(users[0].get("display_name") or "")
        await self._refuse_same_name(name)
        conn = await self._conn()
        users_t = self.user_table
        (person,) = decode_rows(users_t, users)
        person.pop("id", None)
        if person.get("is_owner"):
            # Owning the lifebot she left does not make her an owner of this one (owners
            # approve strangers' pairing codes): only of one that has no owner yet.
            has_owner = select(users_t.c.id).where(users_t.c.is_owner).limit(1)
            person["is_owner"] = (await conn.execute(has_owner)).first() is None
        # The user row first: its id comes from the database, and on SQLite this first write
        # takes the one writer's lock, so the ids handed out next stay free until commit.
        new_user = (
            await conn.execute(insert(users_t).values(**person).returning(users_t.c.id))
        ).scalar_one()
        ids = IdMap(new={USER: {old_user: int(new_user)}})
        for table in self.tables:
            if int_id_column(table) is None:
                continue
            rows_in = data.get(table.name) or []
            olds = sorted({int(r["id"]) for r in rows_in if r.get("id") is not None})
            fresh = await allocate(conn, table, len(olds))
            ids.new[table.name] = dict(zip(olds, fresh, strict=True))
        remap = Remapper(ids, references)
        rows = {
            t.name: [remap.row(t, r) for r in decode_rows(t, data.get(t.name) or [])]
            for t in self.tables
        }
        taken = [
            hit
            for t in self.tables
            for hit in await self._taken(t, rows[t.name], remap.new_id_columns(t))
        ]
        if taken:
            more = f" (and {len(taken) - 5} more)" if len(taken) > 5 else ""
            raise ImportConflict(
                f"cannot import {name or 'this user'}: {'; '.join(taken[:5])}{more}. An import "
                "never merges two people: unlink or delete those there first. Nothing was "
                "imported."
            )
        for table in self.tables:
            if rows[table.name]:
                await conn.execute(insert(table), rows[table.name])
        return int(new_user), ids

    async def _refuse_same_name(self, name: str) -> None:
        """Two users of one name: ``--user ana`` could no longer say which."""
        if not name.strip():
            return
        conn = await self._conn()
        users = self.user_table
        found = (
            await conn.execute(
                select(users.c.id).where(func.lower(users.c.display_name) == name.strip().lower())
            )
        ).first()
        if found is not None:
            raise ImportConflict(
                f"this database already has a user named {name} (user {found[0]}): an import "
                "never merges two people. Import under another name "
                "(`lifebot import EXPORT.zip --as NEW-NAME`); nothing was imported."
            )

    async def _taken(self, table: Table, rows: list[dict[str, Any]], fresh: set[str]) -> list[str]:
        """What of ``rows`` must be unique across users and is already there, in words.

        A set with a column of ``fresh`` (new ids, which no row here has) cannot clash.
        """
        found: list[str] = []
        if not rows:
            return found
        conn = await self._conn()
        for cols in _unique_sets(table):
            if fresh & set(cols):
                continue
            keyed = [tuple(r.get(c) for c in cols) for r in rows]
            values = sorted({k for k in keyed if None not in k}, key=repr)
            for start in range(0, len(values), 500):
                chunk = values[start : start + 500]
                columns = [table.c[c] for c in cols]
                where = (
                    columns[0].in_([v[0] for v in chunk])
                    if len(cols) == 1
                    else tuple_(*columns).in_(chunk)
                )
                owner = [table.c.user_id] if "user_id" in table.c else []
                hit = (await conn.execute(select(*columns, *owner).where(where).limit(1))).first()
                if hit is None:
                    continue
                shown = ", ".join(
                    f"{c}={'…' if any(w in c for w in _SECRET_COLUMN) else hit[i]}"
                    for i, c in enumerate(cols)
                )
                whose = await self._whose(int(hit[len(cols)])) if owner else "another row"
                found.append(f"{table.name} {shown} already belongs to {whose}")
                break
        return found

    async def _whose(self, user_id: int) -> str:
        conn = await self._conn()
        users = self.user_table
        q = select(users.c.display_name).where(users.c.id == user_id)
        got = (await conn.execute(q)).first()
        return f"{got[0]} (user {user_id})" if got is not None else f"user {user_id}"

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


def _refuse_kept_ids_elsewhere(
    table: Table, rows: list[dict[str, Any]], data: dict[str, list[dict[str, Any]]]
) -> None:
    """ValueError when a row points at a row of a kept (text) id the export does not hold.

    Such ids are not made new (a pendant session's), so one the export lacks could only be
    another person's row here: her audio segment in Bob's session.
    """
    for column in table.columns:
        for fk in column.foreign_keys:
            target = fk.column.table
            if int_id_column(target) is not None or target.name == USER:
                continue
            held = {r.get(fk.column.name) for r in data.get(target.name) or []}
            if any(r.get(column.name) is not None and r[column.name] not in held for r in rows):
                raise ValueError(
                    f"{table.name}.{column.name} points at a {target.name} the export does not hold"
                )


def _unique_sets(table: Table) -> list[tuple[str, ...]]:
    """Column sets of ``table`` unique across users.

    A primary key that is not a new id, unique constraints and unique indexes, each without
    ``user_id`` (those are one person's own, and the user's id is new).
    """
    sets: list[tuple[str, ...]] = []
    if int_id_column(table) is None:
        sets.append(tuple(c.name for c in table.primary_key.columns))
    sets.extend(
        tuple(c.name for c in con.columns)
        for con in table.constraints
        if isinstance(con, UniqueConstraint)
    )
    sets.extend(
        tuple(c.name for c in index.columns)
        for index in table.indexes
        if isinstance(index, Index) and index.unique
    )
    sets.extend((c.name,) for c in table.columns if c.unique)
    out: list[tuple[str, ...]] = []
    for cols in sets:
        if cols and "user_id" not in cols and cols not in out:
            out.append(cols)
    return out


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
