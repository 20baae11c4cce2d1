"""Column types and helpers shared by every table."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    DateTime,
    Dialect,
)
from sqlalchemy.types import TypeDecorator

MAX_ROW_ID = 2**31 - 1
"""The largest id a row can have: the tables' ``id`` columns are ``INTEGER``, which stops here
on PostgreSQL (SQLite's goes further). A larger number names no row and must be refused
before it reaches a query, where PostgreSQL's driver fails on it instead of finding nothing."""


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (the only time stored)."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes as UTC and always gives them back aware (SQLite drops zones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes; normalise aware ones to UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; pass an aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to what SQLite returns naive."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
