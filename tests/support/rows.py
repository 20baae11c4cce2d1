"""A row for every table, made from the table's own columns (issue 28's contract tests).

Nothing here names a table: a new table with a ``user_id`` gets its row the day it is
declared, so export, import and delete are tested over it without anyone editing a test.
Every column is filled, nullable ones too, with a value of its type that a careless encoder
would get wrong (a leap-day date, microseconds, non-ASCII text, all 256 byte values, a big
integer); foreign keys point at the rows made for the tables they reference.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Column, Table, insert, select, types
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import SQLModel

import storage.models  # noqa: F401  # registers every table in the metadata


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


def row_for(table: Table, user_id: int, salt: int, ids: dict[str, Any]) -> dict[str, Any]:
    """One row of ``table`` for ``user_id``; ``ids`` has the made rows' keys by table."""
    row: dict[str, Any] = {}
    for column in table.columns:
        if column.name == "user_id":
            row[column.name] = user_id
        elif column.foreign_keys:
            (fk,) = column.foreign_keys
            row[column.name] = ids[fk.column.table.name]
        elif column.primary_key:
            if column.type.python_type is int:
                row[column.name] = 7_000_000 + 1000 * salt + len(ids)
            else:
                row[column.name] = f"s{salt}-{table.name}"
        else:
            row[column.name] = _value(table, column, salt)
    return row


async def fill(conn: AsyncConnection, tables: set[str], user_id: int, salt: int) -> None:
    """Insert one generated row into every table of ``tables`` for ``user_id``."""
    ids: dict[str, Any] = {"user": user_id}
    for table in SQLModel.metadata.sorted_tables:
        if table.name not in tables:
            continue
        row = row_for(table, user_id, salt, ids)
        await conn.execute(insert(table).values(**row))
        (pk,) = table.primary_key.columns if len(table.primary_key.columns) == 1 else (None,)
        if pk is not None:
            ids[table.name] = row[pk.name]


async def rows_of(conn: AsyncConnection, tables: set[str], user_id: int) -> dict[str, list[Any]]:
    """Every row of ``user_id`` in each table, as sorted tuples (to compare before and after)."""
    out: dict[str, list[Any]] = {}
    for table in SQLModel.metadata.sorted_tables:
        if table.name in tables:
            got = (await conn.execute(select(table).where(table.c.user_id == user_id))).all()
            out[table.name] = sorted((tuple(r) for r in got), key=repr)
    return out
