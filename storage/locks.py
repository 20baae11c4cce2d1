"""Locks that hold across every process on one PostgreSQL database.

``AdvisoryKeyedLocks`` serialises work per key (a conversation) whichever ``serve`` process
runs it: a transaction-level advisory lock held on a dedicated connection for as long as the
work lasts. If the process dies its connection closes and the server frees the lock.
It implements ``bot.locks.ConversationLock[int]``. Within one process, waiters queue in
memory first, so a busy conversation costs one connection, not one per queued message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot.locks import KeyedLocks

CONVERSATION_SPACE = 7_140_001
"""The first half of a two-part advisory lock id: "a conversation" (the second is its id)."""
MIGRATION_KEY = 7_140_002
"""The advisory lock id taken while migrations run (one process migrates, the others wait)."""


class AdvisoryKeyedLocks:
    """PostgreSQL ``pg_advisory_xact_lock(space, key)``, one connection per held key.

    The connections come from a pool of their own: a turn holding a lock also needs ordinary
    sessions, and sharing one pool could leave every connection held by a waiting lock.
    """

    def __init__(self, url: str, *, space: int = CONVERSATION_SPACE, pool_size: int = 8) -> None:
        self.space = space
        # At most 2 x pool_size conversations in turn at once per process (the rest queue):
        # three processes then stay within PostgreSQL's default 100 connections with their
        # ordinary pools. A queued turn waits as long as it takes, never fails on the pool.
        self.engine: AsyncEngine = create_async_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_timeout=3600,
            pool_pre_ping=True,
        )
        self._local = KeyedLocks[int]()

    @asynccontextmanager
    async def hold(self, key: int) -> AsyncIterator[None]:
        """Hold ``key`` across processes until the block ends (or this process dies)."""
        # The lock lives as long as the transaction; leaving the block ends both.
        async with self._local.hold(key), self.engine.connect() as conn, conn.begin():
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:space, :key)"),
                {"space": self.space, "key": _int4(key)},
            )
            yield

    async def close(self) -> None:
        """Close the lock connections."""
        await self.engine.dispose()


def _int4(key: int) -> int:
    """Fold a key into PostgreSQL's int4 range (conversation ids fit; this only guards)."""
    return ((key + 2**31) % 2**32) - 2**31
