"""Helpers on a session's transaction: its connection, and a limit for a frozen holder.

The connection is asked of SQLAlchemy once per transaction; the limit ends a PostgreSQL
transaction whose process froze while holding rows another process needs.
"""

from __future__ import annotations

from sqlalchemy import func, select
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


FROZEN_HOLDER_LIMIT = 5.0
"""Seconds PostgreSQL lets a bounded transaction (``bound_idle``) wait between statements
before it ends it, and with it the row locks it holds (the default of ``Database``'s
``holder_limit``)."""
HOLDER_LIMIT_KEY = "lifebot.holder_limit"
"""The key of a session's ``info`` under which its database puts its ``holder_limit``."""
_BOUND = "lifebot.bounded"


async def bound_idle(s: AsyncSession) -> None:
    """End this transaction if its process freezes half-way (PostgreSQL only).

    The server ends it when it waits between statements longer than the database's
    ``holder_limit`` (``FROZEN_HOLDER_LIMIT`` by default): its process is frozen (SIGSTOP, a
    paused VM) or gone.

    For short transactions that lock rows another process must take over (the leader lease,
    the outbox's rows): a leader frozen between an UPDATE and its COMMIT would otherwise keep
    those rows locked, and the next leader would wait on them for as long as it stayed frozen.
    Set once per transaction; nothing on SQLite (one process, whose freeze stops everything).
    """
    if s.bind is None or s.bind.dialect.name != "postgresql":
        return
    current = s.sync_session.get_transaction()
    if current is not None and s.info.get(_BOUND) is current:
        return
    conn = await connection_of(s)
    seconds = float(s.info.get(HOLDER_LIMIT_KEY, FROZEN_HOLDER_LIMIT))
    limit = f"{int(seconds * 1000)}ms"
    await conn.execute(select(func.set_config("idle_in_transaction_session_timeout", limit, True)))
    s.info[_BOUND] = s.sync_session.get_transaction()


async def unbounded_idle(s: AsyncSession) -> None:
    """Let this transaction wait between statements as long as it must (PostgreSQL only).

    For the few that wait on purpose while other connections work: an import holds its rows
    uncommitted while it puts the export's files back, so that a file that fails takes the
    rows with it, and a large export's files take longer than ``FROZEN_TRANSACTION_LIMIT``.
    """
    if s.bind is None or s.bind.dialect.name != "postgresql":
        return
    conn = await connection_of(s)
    await conn.execute(select(func.set_config("idle_in_transaction_session_timeout", "0", True)))
