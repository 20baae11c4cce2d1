"""Dialect-aware ``INSERT ... ON CONFLICT DO NOTHING`` shared by the repositories."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel.ext.asyncio.session import AsyncSession


def insert_ignore(session: AsyncSession, table: Any, conflict: list[str]) -> Any:
    """An insert on ``table`` that does nothing when ``conflict`` columns already exist."""
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    ins = postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)
    return ins.on_conflict_do_nothing(index_elements=conflict)
