"""A row for every table, made from the table's own columns (issue 28's contract tests).

Nothing here names a table: a new table with a ``user_id`` gets its row the day it is
declared, so export, import and delete are tested over it without anyone editing a test.
Every column is filled, nullable ones too, with a value of its type that a careless encoder
would get wrong (a leap-day date, microseconds, non-ASCII text, all 256 byte values, a big
integer); foreign keys point at the rows made for the tables they reference. A column
computed from another (its ``info["computed_from"]``: the other column and the function, as
a contact's name key) holds what the app would make of the other's value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Column, Table, insert, select, types
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import SQLModel

import storage.models  # noqa: F401  # registers every table in the metadata
from bot.feature import Reference


def _value(table: Table, column: Column[Any], salt: int) -> Any:
    sa_type = column.type
    if isinstance(sa_type, types.TypeDecorator):
        sa_type = sa_type.impl_instance
    if isinstance(sa_type, types.JSON):
        return {"k": [1, "twø", None, {"n": 3.5}], "salt": salt}
    if isinstance(sa_type, types.DateTime):
        return datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC) + timedelta(minutes=salt)
    if isinstance(sa_type, types.Date):
        return date(2024, 2, 29) + timedelta(days=salt)
    if isinstance(sa_type, types.Time):
        return time(7, 30, 15, 250000)
    if isinstance(sa_type, types.Boolean):
        return True
    if isinstance(sa_type, types.LargeBinary):
        return bytes(range(256)) + bytes([salt % 256])
    if isinstance(sa_type, types.Float):
        return 0.1 + salt
    if isinstance(sa_type, types.Numeric):
        return Decimal("12.345") + salt
    if isinstance(sa_type, types.BigInteger):
        return 2**40 + salt
    if isinstance(sa_type, types.Integer):
        return 1000 + salt
    return f"{table.name}.{column.name} ñ ✓ {salt}"


def pk_ids(
    tables: set[str], user_id: int, salt: int, first_id: int | None = None
) -> dict[str, Any]:
    """The primary key of the one row made in each table (``user`` is ``user_id``).

    ``first_id``: where the integer ids start (two users filled from the same ``first_id``
    have rows of the same ids, as two databases would).
    """
    start = 7_000_000 + 1000 * salt if first_id is None else first_id
    ids: dict[str, Any] = {"user": user_id}
    for table in SQLModel.metadata.sorted_tables:
        if table.name not in tables:
            continue
        pk = list(table.primary_key.columns)
        if len(pk) != 1 or pk[0].foreign_keys:
            continue
        ids[table.name] = (
            start + len(ids) if pk[0].type.python_type is int else f"s{salt}-{table.name}"
        )
    return ids


def row_for(
    table: Table,
    user_id: int,
    salt: int,
    ids: dict[str, Any],
    references: Sequence[Reference] = (),
) -> dict[str, Any]:
    """One row of ``table`` for ``user_id``; ``ids`` has the made rows' keys by table.

    Declared soft references point at the made rows too, in the shape declared (an id, a
    list of ids, an id inside JSON, a text holding ids), so an import that gives new ids
    can be checked value for value.
    """
    row: dict[str, Any] = {}
    for column in table.columns:
        if column.name == "user_id":
            row[column.name] = user_id
        elif column.foreign_keys:
            (fk,) = column.foreign_keys
            row[column.name] = ids[fk.column.table.name]
        elif column.primary_key:
            row[column.name] = ids[table.name]
        else:
            row[column.name] = _value(table, column, salt)
    mine = [r for r in references if r.table == table.name]
    in_json: dict[str, list[Reference]] = {}
    for ref in mine:
        if ref.path:
            in_json.setdefault(ref.column, []).append(ref)
    for ref in mine:
        if ref.path or ref.same_as:
            continue
        if ref.by:
            value, target = ref.targets[0]
            row[ref.by] = value
            row[ref.column] = ids[target]
        elif ref.template:
            row[ref.column] = _filled(ref.template, ids) + f"rest-{salt}"
        else:
            row[ref.column] = ids[ref.target]
    for ref in mine:
        if ref.same_as:
            row[ref.column] = str(row[ref.same_as])
    for name, refs in in_json.items():
        row[name] = _json_for(refs, ids, salt)
    for column in table.columns:  # a key made from another column, as the app makes it
        computed = column.info.get("computed_from")
        if computed is not None:
            source, make = computed
            row[column.name] = make(row[source])
    return row


def _filled(template: str, ids: dict[str, Any]) -> str:
    return re.sub(r"\{([a-z_]+)\}", lambda m: str(ids[m.group(1)]), template)


def _json_for(refs: Sequence[Reference], ids: dict[str, Any], salt: int) -> Any:
    """A JSON value holding an id at each declared path (one shape per path)."""
    if refs[0].path == ("*",):
        return [ids[refs[0].target]]
    if refs[0].path[0] == "*":  # a list of objects, each holding an id
        element: dict[str, Any] = {}
        for ref in refs:
            _put(element, ref, ref.path[1:], _leaf(ref, ids, salt))
        return [element]
    out: dict[str, Any] = {"k": [1, "twø", None, {"n": 3.5}], "salt": salt}
    seen: set[tuple[str, ...]] = set()
    for ref in refs:
        if ref.path in seen:
            continue  # another shape of the same place (a second template): one is enough
        seen.add(ref.path)
        _put(out, ref, ref.path, _leaf(ref, ids, salt))
    return out


def _leaf(ref: Reference, ids: dict[str, Any], salt: int) -> Any:
    if ref.template:
        return _filled(ref.template, ids) + f"rest-{salt}"
    if ref.by:
        return str(ids[ref.targets[0][1]])
    return ids[ref.target]


def _put(node: dict[str, Any], ref: Reference, path: tuple[str, ...], leaf: Any) -> None:
    """Make ``path`` under ``node`` end in ``leaf`` (a list of one element for ``*``)."""
    key, rest = path[0], path[1:]
    if not rest:
        node[key] = leaf
        if ref.by:
            node[ref.by] = ref.targets[0][0]
        return
    step = rest[0]
    if step == "*":
        inner: dict[str, Any] = {}
        if len(rest) == 1:
            node[key] = [leaf]
            return
        if rest[1].isdigit():  # a list as an element: ["label", data]
            node[key] = [["label"] * int(rest[1]) + [leaf]]
            return
        node[key] = [inner]
        _put(inner, ref, rest[1:], leaf)
        return
    inner = node.setdefault(key, {})
    _put(inner, ref, rest, leaf)


async def fill(
    conn: AsyncConnection,
    tables: set[str],
    user_id: int,
    salt: int,
    references: Sequence[Reference] = (),
    first_id: int | None = None,
) -> dict[str, Any]:
    """Insert one generated row into every table of ``tables`` for ``user_id``; their keys."""
    ids = pk_ids(tables, user_id, salt, first_id)
    for table in SQLModel.metadata.sorted_tables:
        if table.name in tables:
            await conn.execute(
                insert(table).values(**row_for(table, user_id, salt, ids, references))
            )
    return ids


def expected_rows(
    tables: set[str], user_id: int, salt: int, ids: dict[str, Any], references: Sequence[Reference]
) -> dict[str, list[Any]]:
    """What ``rows_of`` reads back for rows made with these ids (as ``fill`` made them)."""
    out: dict[str, list[Any]] = {}
    for table in SQLModel.metadata.sorted_tables:
        if table.name in tables:
            row = row_for(table, user_id, salt, ids, references)
            out[table.name] = [tuple(row[c.name] for c in table.columns)]
    return out


async def rows_of(conn: AsyncConnection, tables: set[str], user_id: int) -> dict[str, list[Any]]:
    """Every row of ``user_id`` in each table, as sorted tuples (to compare before and after)."""
    out: dict[str, list[Any]] = {}
    for table in SQLModel.metadata.sorted_tables:
        if table.name in tables:
            got = (await conn.execute(select(table).where(table.c.user_id == user_id))).all()
            out[table.name] = sorted((tuple(r) for r in got), key=repr)
    return out


async def ids_of(conn: AsyncConnection, tables: set[str], user_id: int) -> dict[str, Any]:
    """The key of the one row of ``user_id`` in each of ``tables`` (as ``fill`` made them)."""
    ids: dict[str, Any] = {"user": user_id}
    for table in SQLModel.metadata.sorted_tables:
        pk = list(table.primary_key.columns)
        if table.name not in tables or len(pk) != 1 or pk[0].foreign_keys:
            continue
        got = (await conn.execute(select(pk[0]).where(table.c.user_id == user_id))).all()
        assert len(got) == 1, (table.name, got)
        ids[table.name] = got[0][0]
    return ids
