"""Questions waiting for the user's next plain message (one per user, the newest wins)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import PendingAnswer
from storage.repos._conn import connection_of

_ANSWERS = PendingAnswer.__table__  # type: ignore[attr-defined]
_OPEN = sa.select(_ANSWERS.c.command, _ANSWERS.c.since, _ANSWERS.c.until).where(
    _ANSWERS.c.user_id == sa.bindparam("user_id")
)
"""Built once: every plain message asks whether it answers a question (usually not)."""
_CLOSE = sa.delete(_ANSWERS).where(_ANSWERS.c.user_id == sa.bindparam("user_id"))


class AnswerRepo:
    """Ask, look up and clear the open question of a user."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def ask(self, user_id: int, command: str, since: datetime, until: datetime) -> None:
        """The user's next plain message from ``since`` to ``until`` completes ``command``."""
        row = await self.s.get(PendingAnswer, user_id) or PendingAnswer(
            user_id=user_id, command=command, since=since, until=until
        )
        row.command, row.since, row.until = command, since, until
        self.s.add(row)
        await self.s.flush()

    async def take(self, user_id: int, now: datetime) -> str | None:
        """The command a message sent at ``now`` answers, clearing the question; else None.

        A question not yet open (held through quiet hours) is left alone; a lapsed one goes.
        """
        # Columns, not an ORM object: this runs for every plain message.
        conn = await connection_of(self.s)
        row = (await conn.execute(_OPEN, {"user_id": user_id})).first()
        if row is None or now < row.since:
            return None
        await conn.execute(_CLOSE, {"user_id": user_id})
        return str(row.command) if now <= row.until else None

    async def clear(self, user_id: int, command: str | None = None) -> None:
        """Forget the open question (only if it is ``command``, when given)."""
        row = await self.s.get(PendingAnswer, user_id)
        if row is not None and (command is None or row.command == command):
            await self.s.delete(row)
            await self.s.flush()
