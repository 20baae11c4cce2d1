"""SQLite through aiosqlite with one trip to the database thread per statement.

aiosqlite runs every call on its own thread, and SQLAlchemy's adapter makes four calls per
statement (open a cursor, execute, fetch, close): four hand-overs between the event loop
and that thread, each costing far more CPU than the statement itself (about 0.2 ms each,
measured by ``bench dispatch``). Here a statement is one call that opens a cursor, executes,
fetches and closes it on the database thread; a pool's "reset on return" rollback is skipped
when no transaction is open (after a failed statement one is assumed open). Same SQL, same
rows, same errors; server-side cursors (used by streaming reads such as the backup) keep
aiosqlite's own cursor.

Handed to ``create_async_engine(..., module=DBAPI)`` for ``sqlite+aiosqlite`` URLs, so the
dialect, the URL and every setting stay as they are.
"""

from __future__ import annotations

import collections
import sqlite3
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util.concurrency import await_


class _Outcome:
    """What one finished statement left behind (the cursor itself is already closed)."""

    __slots__ = ("arraysize", "description", "lastrowid", "rowcount")

    def __init__(self) -> None:
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    def close(self) -> None:
        """Nothing to close: the statement closed its cursor on the database thread."""


def _run(
    conn: sqlite3.Connection, sql: str, params: Any, many: bool
) -> tuple[Any, int, int | None, list[Any], bool]:
    """On the database thread: the whole statement, then the connection's transaction state."""
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(sql, params)
        elif params is None:
            cursor.execute(sql)
        else:
            cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows, conn.in_transaction
    finally:
        cursor.close()


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A cursor whose every statement is one call on aiosqlite's thread."""

    __slots__ = ()
    _awaitable_cursor_close = False

    def _make_new_cursor(self, connection: Any) -> Any:
        return _Outcome()  # no trip: the real cursor lives only inside ``_run``

    def _aenter_cursor(self, cursor: Any) -> Any:
        return cursor

    async def _execute_async(self, operation: Any, parameters: Any) -> Any:
        return await self._trip(operation, parameters, many=False)

    async def _executemany_async(self, operation: Any, seq_of_parameters: Any) -> Any:
        return await self._trip(operation, seq_of_parameters, many=True)

    async def _trip(self, operation: Any, parameters: Any, *, many: bool) -> None:
        adapt = self._adapt_connection
        assert isinstance(adapt, OneTripConnection)
        conn: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        async with adapt._execute_mutex:
            try:
                # aiosqlite's own way onto its thread; private, but the adapter relies on it.
                description, rowcount, lastrowid, rows, open_tx = await conn._execute(  # type: ignore[no-untyped-call]  # aiosqlite leaves it untyped
                    _run, conn._conn, operation, parameters, many
                )
            except BaseException:
                # sqlite3 opens the transaction (BEGIN, and with a write the one writer's
                # lock) before the statement fails, and a failed statement does not end it:
                # assume it open, so the rollback that follows reaches SQLite. Else the
                # connection went back to the pool holding the lock, and every other writer
                # waited out its busy timeout into "database is locked".
                adapt.in_transaction = True
                raise
        outcome = self._cursor
        assert isinstance(outcome, _Outcome)
        outcome.description, outcome.rowcount, outcome.lastrowid = description, rowcount, lastrowid
        self._rows = collections.deque(rows)
        adapt.in_transaction = open_tx


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    """aiosqlite's adapter that knows whether a transaction is open (without a trip)."""

    __slots__ = ("in_transaction",)
    _cursor_cls = OneTripCursor

    def __init__(self, dbapi: Any, connection: Any) -> None:
        super().__init__(dbapi, connection)
        self.in_transaction = False
        """Set after every statement from the database thread; a commit or rollback ends it."""

    def cursor(self, server_side: bool = False) -> Any:
        """A one-trip cursor; a server-side (streaming) one is aiosqlite's own."""
        if server_side:
            self.in_transaction = True  # not tracked through aiosqlite's cursor: assume open
        return super().cursor(server_side=server_side)

    def commit(self) -> None:
        """Commit; no trip when nothing was written or read since the last one."""
        if self.in_transaction:
            super().commit()
            self.in_transaction = False

    def rollback(self) -> None:
        """Roll back; no trip when no transaction is open (the pool's reset on return)."""
        if self.in_transaction:
            super().rollback()
            self.in_transaction = False


class OneTripDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """The aiosqlite DB-API module, handing out one-trip connections."""

    def connect(self, *arg: Any, **kw: Any) -> OneTripConnection:
        """Open a connection (aiosqlite's thread) wrapped in the one-trip adapter."""
        connection = aiosqlite.connect(*arg, **kw)
        connection._thread.daemon = True  # as SQLAlchemy's adapter does
        return OneTripConnection(self, await_(connection))


DBAPI = OneTripDBAPI(aiosqlite, sqlite3)
"""Pass as ``module=`` to ``create_async_engine`` for a ``sqlite+aiosqlite`` URL."""
