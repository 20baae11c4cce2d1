"""Episodes and the extraction cursors that say how far each message stream was read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import sqlalchemy as sa
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Episode, MemoryCursor, Message
from storage.repos._conn import connection_of
from storage.repos._upsert import insert_ignore
from storage.repos.memory_index import indexable_message


class StreamLine(Protocol):
    """What extraction reads of a message (a ``Message``, or a plain row of these columns)."""

    @property
    def id(self) -> int | None:
        """The row's id."""

    @property
    def user_id(self) -> int | None:
        """Whose message it is."""

    @property
    def conversation_id(self) -> int | None:
        """Its conversation (None for a channel chat's stream, such as a device's)."""

    @property
    def channel(self) -> str:
        """The channel it came from (``device`` for a transcript)."""

    @property
    def chat_id(self) -> str:
        """The chat it came from."""

    @property
    def text(self) -> str:
        """The words."""

    @property
    def meta(self) -> dict[str, Any] | None:
        """Speaker, import id, link... (see ``speaker_of``)."""

    @property
    def created_at(self) -> datetime:
        """When it was said."""


_LINE_COLUMNS = (
    col(Message.id),
    col(Message.user_id),
    col(Message.conversation_id),
    col(Message.channel),
    col(Message.chat_id),
    col(Message.text),
    col(Message.meta),
    col(Message.created_at),
)
"""The columns of a ``StreamLine``: extraction reads rows of these, not ORM objects (an open
episode's every message is read again each time it grows)."""


def scope_of(msg: StreamLine) -> str:
    """The stream a message belongs to: its conversation, else its channel chat."""
    if msg.conversation_id is not None:
        return f"conv:{msg.conversation_id}"
    return f"chan:{msg.channel}:{msg.chat_id}"


class EpisodeRepo:
    """Episodes of one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(self, episode: Episode) -> Episode:
        """Store a new episode."""
        self.s.add(episode)
        await self.s.flush()
        return episode

    async def save(self, episode: Episode) -> None:
        """Write changes to an episode."""
        self.s.add(episode)
        await self.s.flush()

    async def note_unusable(self, user_id: int, episode_id: int, retry_at: datetime) -> int:
        """Count an unusable answer for an episode's summary; returns the attempts so far."""
        ep = await self.get(user_id, episode_id)
        if ep is None:
            return 0
        ep.summary_attempts += 1
        ep.summary_retry_at = retry_at
        self.s.add(ep)
        return ep.summary_attempts

    async def given_up(self, max_attempts: int = 5) -> int:
        """How many episodes kept their stand-in summary after ``max_attempts`` bad answers."""
        res = await self.s.exec(
            select(sa.func.count())
            .select_from(Episode)
            .where(
                col(Episode.summarized).is_(False), col(Episode.summary_attempts) >= max_attempts
            )
        )
        return int(res.one())

    async def get(self, user_id: int, episode_id: int) -> Episode | None:
        """One of this user's episodes."""
        res = await self.s.exec(
            select(Episode).where(Episode.id == episode_id, Episode.user_id == user_id)
        )
        return res.first()

    async def last_in_scope(self, user_id: int, scope: str) -> Episode | None:
        """The newest episode of a stream (a new chunk may continue it)."""
        res = await self.s.exec(
            select(Episode)
            .where(Episode.user_id == user_id, Episode.scope == scope)
            .order_by(col(Episode.end_at).desc(), col(Episode.id).desc())
        )
        return res.first()

    async def between(
        self, user_id: int, start: datetime | None, end: datetime | None, limit: int
    ) -> list[Episode]:
        """Episodes that overlap [start, end), oldest first."""
        q = select(Episode).where(Episode.user_id == user_id)
        if start is not None:
            q = q.where(col(Episode.end_at) >= start)
        if end is not None:
            q = q.where(col(Episode.start_at) < end)
        q = q.order_by(col(Episode.start_at)).limit(limit)
        return list((await self.s.exec(q)).all())

    async def started_between(
        self, user_id: int, start: datetime, end: datetime, limit: int
    ) -> list[Episode]:
        """Episodes that started in [start, end), oldest first (a day's recap)."""
        res = await self.s.exec(
            select(Episode)
            .where(
                Episode.user_id == user_id,
                col(Episode.start_at) >= start,
                col(Episode.start_at) < end,
            )
            .order_by(col(Episode.start_at))
            .limit(limit)
        )
        return list(res.all())

    async def unsummarized(
        self, limit: int, before: datetime, *, now: datetime | None = None, max_attempts: int = 5
    ) -> list[Episode]:
        """Episodes with a stand-in summary that ended before ``before``.

        Leaves out those whose backoff runs past ``now`` and those the model answered
        unusably ``max_attempts`` times (given up: they keep their stand-in summary).
        """
        conds = [
            col(Episode.summarized).is_(False),
            col(Episode.end_at) < before,
            col(Episode.channel) != "import",
            col(Episode.summary_attempts) < max_attempts,
        ]
        if now is not None:
            conds.append(
                sa.or_(
                    col(Episode.summary_retry_at).is_(None), col(Episode.summary_retry_at) <= now
                )
            )
        res = await self.s.exec(
            select(Episode).where(*conds).order_by(col(Episode.id)).limit(limit)
        )
        return list(res.all())


class CursorRepo:
    """Per-stream extraction cursors."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, user_id: int, scope: str) -> int:
        """The last message id extraction has read in a stream (0: nothing yet)."""
        res = await self.s.exec(
            select(MemoryCursor.last_message_id).where(
                MemoryCursor.user_id == user_id, MemoryCursor.scope == scope
            )
        )
        return int(res.first() or 0)

    async def advance(self, user_id: int, scope: str, message_id: int, now: datetime) -> None:
        """Move a stream's cursor forward (never back)."""
        await self.s.exec(
            insert_ignore(self.s, MemoryCursor, ["user_id", "scope"]).values(
                user_id=user_id, scope=scope, last_message_id=0, updated_at=now
            )
        )
        row = (
            await self.s.exec(
                select(MemoryCursor).where(
                    MemoryCursor.user_id == user_id, MemoryCursor.scope == scope
                )
            )
        ).one()
        if message_id > row.last_message_id:
            row.last_message_id = message_id
            row.updated_at = now
            self.s.add(row)

    async def unread(self, user_id: int, scope: str, limit: int) -> list[StreamLine]:
        """Memory-worthy messages of a stream after its cursor, oldest first (plain rows)."""
        after = await self.get(user_id, scope)
        q = sa.select(*_LINE_COLUMNS).where(
            col(Message.user_id) == user_id, col(Message.id) > after, *indexable_message()
        )
        if scope.startswith("conv:"):
            q = q.where(col(Message.conversation_id) == int(scope.split(":", 1)[1]))
        else:
            _, channel, chat = scope.split(":", 2)
            q = q.where(
                col(Message.conversation_id).is_(None),
                col(Message.channel) == channel,
                col(Message.chat_id) == chat,
            )
        q = q.order_by(col(Message.created_at), col(Message.id)).limit(limit)
        conn = await connection_of(self.s)
        return cast("list[StreamLine]", list((await conn.execute(q)).all()))

    async def streams_with_unread(self) -> list[tuple[int, str, datetime, int]]:
        """Streams with unread messages: (user id, scope, newest message time, unread count)."""
        cur = sa.orm.aliased(MemoryCursor)
        conv_scope = sa.case(
            (
                col(Message.conversation_id).is_not(None),
                sa.literal("conv:") + sa.cast(col(Message.conversation_id), sa.String),
            ),
            else_=sa.literal("chan:") + col(Message.channel) + ":" + col(Message.chat_id),
        )
        q = (
            sa.select(
                col(Message.user_id),
                conv_scope.label("scope"),
                sa.func.max(col(Message.created_at)),
                sa.func.count(),
            )
            .outerjoin(
                cur,
                sa.and_(col(cur.user_id) == col(Message.user_id), col(cur.scope) == conv_scope),
            )
            .where(
                *indexable_message(),
                col(Message.id) > sa.func.coalesce(col(cur.last_message_id), 0),
            )
            .group_by(col(Message.user_id), conv_scope)
        )
        conn = await connection_of(self.s)
        rows = (await conn.execute(q)).all()
        return [(int(r[0]), str(r[1]), _aware(r[2]), int(r[3])) for r in rows]

    async def lines(self, user_id: int, ids: Sequence[int]) -> list[StreamLine]:
        """This user's messages by id as plain rows of a ``StreamLine``'s columns, oldest first."""
        if not ids:
            return []
        q = (
            sa.select(*_LINE_COLUMNS)
            .where(col(Message.user_id) == user_id, col(Message.id).in_(list(ids)))
            .order_by(col(Message.created_at), col(Message.id))
        )
        conn = await connection_of(self.s)
        return cast("list[StreamLine]", list((await conn.execute(q)).all()))

    async def messages(self, user_id: int, ids: Sequence[int]) -> list[Message]:
        """This user's messages by id, oldest first."""
        res = await self.s.exec(
            select(Message)
            .where(Message.user_id == user_id, col(Message.id).in_(list(ids)))
            .order_by(col(Message.created_at), col(Message.id))
        )
        return list(res.all())


def _aware(value: object) -> datetime:
    # max() over a UTCDateTime column comes back untyped (a string on SQLite).
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)
