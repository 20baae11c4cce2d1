"""Requests arriving together: what each answers is what it would answer alone.

Fired at once through the real app over a real socket (uvicorn in the test's loop), on SQLite
and on PostgreSQL: none may answer 500 ("database is locked", a unique key violated) and none
may store twice what the same requests one after another store once.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from storage.db import Database


async def test_a_failed_first_write_leaves_sqlite_writable_for_everyone_else(
    tmp_path: Path,
) -> None:
    """A unit of work whose first write breaks a unique key must give the write lock back.

    SQLite opens the transaction (and takes the one writer's lock) before the statement
    fails; the one-trip driver did not notice, skipped the rollback and pooled the connection
    still holding the lock: every other writer (another request, ``lifebot`` on the command
    line) waited its 15 s and got "database is locked".
    """
    path = tmp_path / "x.db"
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        async with db.session() as s:
            await (await s.connection()).execute(text("CREATE TABLE t (k TEXT PRIMARY KEY)"))
            await (await s.connection()).execute(text("INSERT INTO t VALUES ('a')"))
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                await (await s.connection()).execute(text("INSERT INTO t VALUES ('a')"))
        other = sqlite3.connect(path, timeout=2)  # another process, as the CLI beside serve
        try:
            other.execute("INSERT INTO t VALUES ('b')")
            other.commit()
        finally:
            other.close()
        async with db.session() as s:  # and the pooled connection carries on cleanly
            await (await s.connection()).execute(text("INSERT INTO t VALUES ('c')"))
        async with db.session() as s:
            rows = (await (await s.connection()).execute(text("SELECT k FROM t ORDER BY k"))).all()
        assert [r[0] for r in rows] == ["a", "b", "c"]
    finally:
        await db.dispose()
