"""Hand a push to the process that holds its channel: PostgreSQL ``LISTEN``/``NOTIFY``.

A pendant is connected to one ``serve`` process; the leader's outbox may run in another. When
the leader finds the pendant away, it releases the push and notifies (in the same
transaction, so the news arrives once the row is free); every process listening tries the row
through its own channels, and the one the pendant is connected to sends it. Claiming a row is
a conditional update, so only one process ever sends it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

log = logging.getLogger(__name__)

PUSH_CHANNEL = "lifebot_push"
"""The notification channel; the payload is an outbox row id."""


async def notify_push(session: AsyncSession, row_id: int) -> None:
    """Tell every listening process that row ``row_id`` waits for a channel it may hold."""
    await session.exec(  # type: ignore[call-overload]
        text("SELECT pg_notify(:channel, :payload)"),
        params={"channel": PUSH_CHANNEL, "payload": str(row_id)},
    )


class PushListener:
    """Listens on a connection of its own and calls ``on_row`` for each handed-over row."""

    def __init__(self, url: str, on_row: Callable[[int], Awaitable[None]]) -> None:
        # asyncpg takes the plain URL, without SQLAlchemy's driver suffix.
        self.url = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        self.on_row = on_row
        self._conn: Any = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Open the connection and start listening."""
        self._conn = await asyncpg.connect(self.url)
        await self._conn.add_listener(PUSH_CHANNEL, self._heard)

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if not payload.isdigit():
            log.warning("ignored a malformed push notification: %r", payload[:40])
            return
        task = asyncio.create_task(self._handle(int(payload)), name=f"handover-{payload}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, row_id: int) -> None:
        try:
            await self.on_row(row_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not take over push %s", row_id)

    async def close(self) -> None:
        """Stop listening; wait for hand-overs in progress."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
