"""Inserts shared by the repositories.

Dialect-aware ``INSERT ... ON CONFLICT`` statements, and ``add_unless_taken`` for a row a
unique rule may refuse.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession


def _insert(session: AsyncSession, table: Any) -> Any:
    """The dialect's own INSERT construct (it knows ON CONFLICT)."""
    return dialect_insert(
        session.bind.dialect.name if session.bind is not None else "sqlite", table
    )


def dialect_insert(dialect: str, table: Any) -> Any:
    """The INSERT construct of the dialect named ``dialect`` (for statements built once)."""
    # Imported per dialect: loading PostgreSQL's dialect costs a SQLite start-up ~50 ms.
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql  # noqa: PLC0415

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite  # noqa: PLC0415

    return sqlite.insert(table)


def insert_ignore(session: AsyncSession, table: Any, conflict: list[str]) -> Any:
    """An insert on ``table`` that does nothing when ``conflict`` columns already exist."""
    return _insert(session, table).on_conflict_do_nothing(index_elements=conflict)


def insert_or_update(
    session: AsyncSession,
    table: Any,
    values: dict[str, Any],
    conflict: list[str],
    update: list[str],
    where: Any = None,
) -> Any:
    """Insert ``values``; if a row with the same ``conflict`` columns exists, set ``update``.

    ``where`` names a partial unique index (its WHERE clause), as in "one pending job per
    meeting". One statement, so two writers arriving together cannot both insert.
    """
    stmt = _insert(session, table).values(**values)
    return stmt.on_conflict_do_update(
        index_elements=conflict,
        index_where=where,
        set_={name: stmt.excluded[name] for name in update},
    )


async def add_unless_taken(session: AsyncSession, row: Any) -> IntegrityError | None:
    """Add and flush ``row`` in a savepoint: None when stored, else the unique rule's refusal.

    For a row that claims something unique (a name, an address, a wording) checked just
    before: a request arriving together may have claimed it meanwhile, and the database
    decides. Only this row's change is rolled back; the caller answers as it would have had
    the earlier check seen the other row (and re-raises the refusal when it finds none).
    """
    try:
        async with session.begin_nested():
            session.add(row)
            await session.flush()
    except IntegrityError as exc:
        return exc
    return None
