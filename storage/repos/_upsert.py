"""Dialect-aware ``INSERT ... ON CONFLICT DO NOTHING`` shared by the repositories."""

from __future__ import annotations

from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession


def insert_ignore(session: AsyncSession, table: Any, conflict: list[str]) -> Any:
    """An insert on ``table`` that does nothing when ``conflict`` columns already exist."""
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    # Imported per dialect: loading PostgreSQL's dialect costs a SQLite start-up ~50 ms.
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql  # noqa: PLC0415

        return postgresql.insert(table).on_conflict_do_nothing(index_elements=conflict)
    from sqlalchemy.dialects import sqlite  # noqa: PLC0415

    return sqlite.insert(table).on_conflict_do_nothing(index_elements=conflict)
