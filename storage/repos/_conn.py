"""The session's connection for Core statements, asked of SQLAlchemy once per transaction."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel.ext.asyncio.session import AsyncSession

_KEY = "lifebot.connection"


async def connection_of(s: AsyncSession) -> AsyncConnection:
    """``s.connection()``, kept for the rest of the session's current transaction.

    Each ``connection()`` is a hand-over to SQLAlchemy's sync side; the per-message path runs
    about ten Core statements in its units of work (issue 28). The connection is the
    transaction's own, so it is kept only while that transaction is the current one (after a
    commit or rollback the session asks again). Like ``connection()``, it does not flush.
    """
    current = s.sync_session.get_transaction()
    kept = s.info.get(_KEY)
    if current is not None and kept is not None and kept[0] is current:
        conn: AsyncConnection = kept[1]
        return conn
    conn = await s.connection()
    s.info[_KEY] = (s.sync_session.get_transaction(), conn)
    return conn
