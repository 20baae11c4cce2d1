"""Messages and conversations: the ground truth of what was said."""

from __future__ import annotations

import typing
from datetime import datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy import String, cast, or_, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from bot.messages import Address, InboundMessage
from storage.models import Conversation, Message, utcnow
from storage.repos._conn import connection_of
from storage.repos._upsert import dialect_insert, insert_ignore

_MESSAGES = Message.__table__  # type: ignore[attr-defined]
_INSERT_ROW = sa.insert(_MESSAGES).returning(_MESSAGES.c.id)
"""Built once: the hot path's reply rows go in without statement construction per call."""
_CONVERSATIONS = Conversation.__table__  # type: ignore[attr-defined]
_TOUCH = (
    sa.update(_CONVERSATIONS)
    .where(_CONVERSATIONS.c.id == sa.bindparam("conv_id"))
    .values(last_message_at=sa.bindparam("at"))
)


_MINE = (_MESSAGES.c.id == sa.bindparam("mid")) & (_MESSAGES.c.user_id == sa.bindparam("uid"))
_SET_STATUS = sa.update(_MESSAGES).where(_MINE).values(status=sa.bindparam("new_status"))
_SET_RECEIPT = (
    sa.update(_MESSAGES).where(_MINE).values(external_id=sa.bindparam("ext"), status="sent")
)
_HISTORY = (
    select(Message)
    .where(
        col(Message.user_id) == sa.bindparam("user_id"),
        col(Message.conversation_id) == sa.bindparam("conv_id"),
        col(Message.status) != "refused",
    )
    .order_by(col(Message.id).desc())
    .limit(sa.bindparam("limit", type_=sa.Integer))
)
"""Every turn reads its history window through these, built once (as is every per-turn
status change): building and cache-keying a statement costs more than SQLite running it."""
_TURN_ROWS = (
    sa.select(
        _MESSAGES.c.id,
        _MESSAGES.c.role,
        _MESSAGES.c.text,
        _MESSAGES.c.tool_calls,
        _MESSAGES.c.tool_call_id,
    )
    .where(
        _MESSAGES.c.user_id == sa.bindparam("user_id"),
        _MESSAGES.c.conversation_id == sa.bindparam("conv_id"),
        _MESSAGES.c.status != "refused",
    )
    .order_by(_MESSAGES.c.id.desc())
    .limit(sa.bindparam("limit", type_=sa.Integer))
)
"""A turn's history window as plain rows: the five columns a prompt is built from."""
_CONVERSATION = select(Conversation).where(
    col(Conversation.id) == sa.bindparam("conv_id"),
    col(Conversation.user_id) == sa.bindparam("user_id"),
)
_THREAD_STATE = sa.select(
    _CONVERSATIONS.c.id,
    _CONVERSATIONS.c.user_id,
    _CONVERSATIONS.c.channel,
    _CONVERSATIONS.c.chat_id,
    _CONVERSATIONS.c.thread_id,
    _CONVERSATIONS.c.title,
    _CONVERSATIONS.c.summary,
    _CONVERSATIONS.c.summary_through,
).where(
    _CONVERSATIONS.c.id == sa.bindparam("conv_id"),
    _CONVERSATIONS.c.user_id == sa.bindparam("user_id"),
)
"""Every turn reads its thread's title and running summary through this: a plain row."""
_SAVE_THREAD = (
    sa.update(_CONVERSATIONS)
    .where(
        _CONVERSATIONS.c.id == sa.bindparam("conv_id"),
        _CONVERSATIONS.c.user_id == sa.bindparam("uid"),
    )
    .values(
        title=sa.bindparam("new_title"),
        summary=sa.bindparam("new_summary"),
        summary_through=sa.bindparam("through"),
    )
)
_RECORD: dict[str, Any] = {}


def _record_statement(dialect: str) -> Any:
    """The inbound message's INSERT ... ON CONFLICT DO NOTHING RETURNING id, built once."""
    stmt = _RECORD.get(dialect)
    if stmt is None:
        stmt = _RECORD[dialect] = (
            dialect_insert(dialect, _MESSAGES)
            .on_conflict_do_nothing(index_elements=["dedupe_key"])
            .returning(_MESSAGES.c.id)
        )
    return stmt


class HistoryRow(Protocol):
    """What a turn reads of a stored message (a ``Message``, or a plain row of its columns)."""

    @property
    def id(self) -> int | None:
        """The row's id (the order stored)."""

    @property
    def role(self) -> str:
        """user, assistant, tool or notice."""

    @property
    def text(self) -> str:
        """The words."""

    @property
    def tool_calls(self) -> list[dict[str, Any]] | None:
        """An assistant row's tool calls (OpenAI's wire form)."""

    @property
    def tool_call_id(self) -> str | None:
        """A tool row's call id."""


class ThreadState(Protocol):
    """What a turn reads of its conversation (a ``Conversation``, or a plain row of these)."""

    @property
    def id(self) -> int | None:
        """The conversation's id."""

    @property
    def user_id(self) -> int:
        """Whose conversation it is."""

    @property
    def channel(self) -> str:
        """Its channel."""

    @property
    def chat_id(self) -> str:
        """Its chat."""

    @property
    def thread_id(self) -> str:
        """The thread (Slack) or topic (Telegram) within the chat; "" for the chat itself."""

    @property
    def title(self) -> str | None:
        """The thread's name."""

    @property
    def summary(self) -> str | None:
        """Older turns of the thread in short."""

    @property
    def summary_through(self) -> int | None:
        """The id of the newest message the summary covers."""


class MessageRepo:
    """Records inbound and outbound messages and reads conversation history."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def record_inbound(
        self,
        msg: InboundMessage,
        *,
        user_id: int | None = None,
        conversation_id: int | None = None,
    ) -> int | None:
        """Store an inbound message first of all; None when its dedupe key was seen before.

        A known sender's message is stored with its user and conversation at once.
        """
        a = msg.address
        conn = await connection_of(self.s)
        row = (
            await conn.execute(
                _record_statement(conn.dialect.name),
                {
                    "user_id": user_id,
                    "conversation_id": conversation_id,
                    "direction": "in",
                    "role": "user",
                    "channel": a.channel,
                    "account": a.account,
                    "chat_id": a.chat_id,
                    "sender_id": msg.sender_id,
                    "external_id": msg.message_id,
                    "dedupe_key": msg.dedupe_key,
                    "text": msg.text,
                    "status": "received",
                    "created_at": msg.received_at,
                    # Overheard speech stays untrusted when /retry answers it later.
                    "meta": {"overheard": True} if msg.overheard else None,
                },
            )
        ).first()
        return int(row[0]) if row is not None else None

    async def texts_by_dedupe_key(self, user_id: int, keys: list[str]) -> dict[str, str]:
        """Dedupe key → text of the user's messages with one of ``keys``."""
        if not keys:
            return {}
        res = await self.s.exec(
            select(Message.dedupe_key, Message.text).where(
                Message.user_id == user_id, col(Message.dedupe_key).in_(keys)
            )
        )
        return {str(k): str(t) for k, t in res.all() if k is not None}

    async def add_new_rows(self, rows: list[dict[str, Any]]) -> list[int]:
        """Insert message rows in one statement, skipping seen dedupe keys; the new rows' ids."""
        if not rows:
            return []
        table = Message.__table__  # type: ignore[attr-defined]
        # Many parameter sets for one compiled statement (SQLAlchemy batches them with their
        # RETURNING): a multi-row VALUES clause would be compiled anew for every batch.
        stmt = insert_ignore(self.s, table, ["dedupe_key"]).returning(table.c.id)
        conn = await connection_of(self.s)
        return [int(r[0]) for r in (await conn.execute(stmt, rows)).all()]

    async def claim_for_user(self, message_id: int, user_id: int, conversation_id: int) -> None:
        """Attach an inbound message to the user and conversation it belongs to."""
        # One UPDATE, no read first: this runs for every message.
        await self._update(
            col(Message.id) == message_id, user_id=user_id, conversation_id=conversation_id
        )

    async def _update(self, where: Any, **values: Any) -> None:
        await self.s.exec(
            update(Message)
            .where(where)
            .values(**values)
            .execution_options(synchronize_session=False)
        )

    async def erase_stranger_message(self, message_id: int) -> None:
        """Keep only the dedupe tombstone of a stranger's message: no text is stored."""
        row = await self.s.get(Message, message_id)
        if row is not None:
            row.text = ""
            row.status = "refused"
            self.s.add(row)

    async def mark_unanswered(self, dedupe_key: str) -> bool:
        """A known person's inbound message that failed mid-turn now waits for /retry.

        True when such a message is stored and now waits (False: nothing was kept).
        """
        res = await self.s.exec(
            select(Message).where(
                Message.dedupe_key == dedupe_key,
                col(Message.user_id).is_not(None),
                Message.status == "received",
            )
        )
        row = res.first()
        if row is None:
            return False
        row.status = "pending_retry"
        self.s.add(row)
        return True

    async def refused_since(
        self, channel: str, account: str, sender_id: str, since: datetime
    ) -> int:
        """How many messages of this stranger were refused since ``since`` (guess throttle)."""
        res = await self.s.exec(
            select(func.count()).where(
                Message.channel == channel,
                Message.account == account,
                Message.sender_id == sender_id,
                Message.status == "refused",
                col(Message.created_at) >= since,
            )
        )
        return int(res.one())

    async def unanswered(self, before: datetime | None = None) -> list[Message]:
        """Known people's inbound messages accepted but never answered (a crash mid-turn).

        ``before``: only those accepted earlier (another live process may be answering the
        newer ones).
        """
        conds: list[Any] = [
            Message.direction == "in",
            col(Message.user_id).is_not(None),
            Message.status == "received",
        ]
        if before is not None:
            conds.append(col(Message.created_at) < before)
        res = await self.s.exec(select(Message).where(*conds).order_by(col(Message.id)))
        return list(res.all())

    async def move_status(self, message_id: int, old: str, new: str) -> bool:
        """Change a message's status only if it still is ``old``.

        True for the one caller whose UPDATE changed it (two recoverers act once).
        """
        res = await self.s.exec(
            update(Message)
            .where(col(Message.id) == message_id, col(Message.status) == old)
            .values(status=new)
        )
        return int(getattr(res, "rowcount", 0) or 0) == 1

    async def earlier_waiting(
        self, conversation_id: int, message_id: int, received_at: datetime, window: timedelta
    ) -> bool:
        """Whether an earlier inbound message of the conversation still waits for its turn.

        Earlier: received before (ties broken by arrival in the database); only those
        received within ``window`` count, so a message whose process died never blocks.
        """
        mine = (col(Message.created_at) < received_at) | (
            (col(Message.created_at) == received_at) & (col(Message.id) < message_id)
        )
        res = await self.s.exec(
            select(Message.id)
            .where(
                Message.conversation_id == conversation_id,
                Message.direction == "in",
                Message.status == "received",
                col(Message.id) != message_id,
                col(Message.created_at) >= received_at - window,
                mine,
            )
            .limit(1)
        )
        return res.first() is not None

    async def get(self, user_id: int, message_id: int) -> Message | None:
        """One message of this user's."""
        res = await self.s.exec(
            select(Message).where(Message.id == message_id, Message.user_id == user_id)
        )
        return res.first()

    async def by_dedupe_key(self, user_id: int, dedupe_key: str) -> Message | None:
        """This user's inbound message with that dedupe key (channel, account, chat, id)."""
        res = await self.s.exec(
            select(Message).where(Message.user_id == user_id, Message.dedupe_key == dedupe_key)
        )
        return res.first()

    async def said_before(
        self, user_id: int, conversation_id: int, dedupe_key: str
    ) -> Message | None:
        """The user's newest message of a conversation before the one with ``dedupe_key``."""
        current = (
            await self.s.exec(
                select(Message).where(Message.user_id == user_id, Message.dedupe_key == dedupe_key)
            )
        ).first()
        q = select(Message).where(
            Message.user_id == user_id,
            Message.conversation_id == conversation_id,
            Message.direction == "in",
            Message.role == "user",
            col(Message.status) != "refused",
        )
        if current is not None:
            q = q.where(col(Message.id) < current.id)
        res = await self.s.exec(q.order_by(col(Message.id).desc()).limit(1))
        return res.first()

    async def set_meta(self, user_id: int, message_id: int, **values: Any) -> Message | None:
        """Merge ``values`` into a message's ``meta`` (a new dict, so the JSON column saves)."""
        row = await self.get(user_id, message_id)
        if row is not None:
            row.meta = {**(row.meta or {}), **values}
            self.s.add(row)
        return row

    async def with_images(self, user_id: int | None = None) -> list[Message]:
        """Inbound messages that carried pictures (``meta`` lists ``images``), oldest first."""
        # JSON is text on SQLite and casts to text on PostgreSQL: one portable filter.
        q = select(Message).where(
            Message.direction == "in",
            col(Message.meta).is_not(None),
            cast(Message.meta, String).like('%"images"%'),
        )
        if user_id is not None:
            q = q.where(Message.user_id == user_id)
        return list((await self.s.exec(q.order_by(col(Message.id)))).all())

    async def set_status(self, user_id: int, message_id: int, status: str) -> None:
        """Change an inbound message's status (answered, pending_retry, failed)."""
        conn = await connection_of(self.s)
        await conn.execute(_SET_STATUS, {"mid": message_id, "uid": user_id, "new_status": status})

    async def add(
        self,
        user_id: int,
        conversation_id: int,
        *,
        role: str,
        text: str,
        direction: str = "internal",
        channel: str = "",
        chat_id: str = "",
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        citations: list[dict[str, Any]] | None = None,
        reply_to_id: int | None = None,
        status: str = "stored",
        flush: bool = True,
    ) -> Message:
        """Store an assistant reply, a tool call or a tool result.

        ``flush=False`` leaves the INSERT to the next flush or commit (the row has no id yet):
        a turn's transcript goes to the database in one batch with its reply.
        """
        row = Message(
            user_id=user_id,
            conversation_id=conversation_id,
            role=role,
            text=text,
            direction=direction,
            channel=channel,
            chat_id=chat_id,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            tool_calls=tool_calls,
            citations=citations,
            reply_to_id=reply_to_id,
            status=status,
            created_at=utcnow(),
        )
        self.s.add(row)
        if flush:
            await self.s.flush()
        return row

    async def add_row(
        self,
        user_id: int,
        conversation_id: int,
        *,
        role: str,
        text: str,
        direction: str = "internal",
        channel: str = "",
        chat_id: str = "",
        citations: list[dict[str, Any]] | None = None,
        reply_to_id: int | None = None,
        status: str = "stored",
    ) -> int:
        """Store a reply (or notice) as ``add`` does, in one INSERT; the new row's id.

        The hot path's variant: no ORM object, no unit-of-work flush of it. Rows left
        pending by ``add(flush=False)`` (a turn's transcript) are written first, so ids keep
        the order things were said in.
        """
        if self.s.new:
            await self.s.flush()
        conn = await connection_of(self.s)
        res = await conn.execute(
            _INSERT_ROW,
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "direction": direction,
                "role": role,
                "channel": channel,
                "account": "",
                "chat_id": chat_id,
                "sender_id": None,
                "external_id": None,
                "dedupe_key": None,
                "text": text,
                "status": status,
                "tool_name": None,
                "tool_call_id": None,
                # None as the ORM stores it (JSON null): the same rows as ``add`` writes.
                "tool_calls": None,
                "citations": citations,
                "reply_to_id": reply_to_id,
                "meta": None,
                "created_at": utcnow(),
            },
        )
        return int(res.scalar_one())

    async def set_receipt(self, user_id: int, message_id: int, external_id: str) -> None:
        """Record the channel's id for a sent message: the proof it was delivered."""
        conn = await connection_of(self.s)
        await conn.execute(_SET_RECEIPT, {"mid": message_id, "uid": user_id, "ext": external_id})

    async def history(self, user_id: int, conversation_id: int, limit: int) -> list[Message]:
        """The last ``limit`` messages of a conversation, oldest first, in the order stored.

        The order lifebot stored them in, not their timestamps: an inbound message carries
        the channel's own time (Telegram's is whole seconds), so a message sent within a
        second of a reply would otherwise come before that reply.
        """
        params = {"user_id": user_id, "conv_id": conversation_id, "limit": limit}
        res = await self.s.exec(_HISTORY, params=params)
        return list(reversed(res.all()))

    async def turn_history(
        self, user_id: int, conversation_id: int, limit: int
    ) -> list[HistoryRow]:
        """``history`` as plain rows of the columns a prompt needs (every turn reads these).

        Read-only rows rather than ORM objects: loading, keying and tracking some 30 objects
        per turn was the largest part of reading the window.
        """
        conn = await connection_of(self.s)
        params = {"user_id": user_id, "conv_id": conversation_id, "limit": limit}
        rows: list[Any] = list((await conn.execute(_TURN_ROWS, params)).all())
        rows.reverse()
        return rows

    async def thread_parent(self, conv: ThreadState) -> Message | None:
        """The message a thread hangs from, kept in its chat's main conversation, if stored.

        A Slack thread's id is its parent message's ts: the person's own message or one of
        lifebot's replies. Topics whose id names no stored message (Telegram) have none.
        """
        if not conv.thread_id:
            return None
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == conv.user_id,
                Message.external_id == conv.thread_id,
                Message.channel == conv.channel,
                Message.chat_id == conv.chat_id,
                Message.conversation_id != conv.id,
                col(Message.role).in_(("user", "assistant")),
                col(Message.status) != "refused",
            )
            .limit(1)
        )
        return res.first()

    async def latest_pending(self, user_id: int, conversation_id: int) -> Message | None:
        """The newest inbound message still waiting for an answer (for /retry)."""
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.conversation_id == conversation_id,
                Message.direction == "in",
                Message.status == "pending_retry",
            )
            .order_by(col(Message.id).desc())
        )
        return res.first()

    async def owners(self, message_ids: list[int]) -> dict[int, int]:
        """Message id -> its user's id, for the given messages that belong to a user."""
        if not message_ids:
            return {}
        res = await self.s.exec(
            select(Message.id, Message.user_id).where(col(Message.id).in_(message_ids))
        )
        return {int(mid): int(uid) for mid, uid in res.all() if mid is not None and uid is not None}

    async def said_between(
        self, user_id: int, start: datetime, end: datetime, limit: int = 200
    ) -> list[Message]:
        """What the user sent in [start, end), oldest first (refused messages left out)."""
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.direction == "in",
                col(Message.created_at) >= start,
                col(Message.created_at) < end,
                col(Message.status) != "refused",
            )
            .order_by(col(Message.id))
            .limit(limit)
        )
        return list(res.all())

    async def last_id_before(self, when: datetime) -> int:
        """The id of the newest message stored before ``when`` (0 when there is none)."""
        res = await self.s.exec(
            select(col(Message.id))
            .where(col(Message.created_at) < when)
            .order_by(col(Message.id).desc())
        )
        return int(res.first() or 0)

    async def people_said_after(self, after_id: int, limit: int) -> list[Message]:
        """What people said after message ``after_id``: their messages and pendant speech."""
        res = await self.s.exec(
            select(Message)
            .where(
                col(Message.id) > after_id,
                col(Message.user_id).is_not(None),
                or_(
                    (col(Message.direction) == "in") & (col(Message.role) == "user"),
                    (col(Message.channel) == "device") & (col(Message.sender_id) == "pendant"),
                ),
            )
            .order_by(col(Message.id))
            .limit(limit)
        )
        return list(res.all())

    async def last_answer(self, user_id: int, conversation_id: int) -> Message | None:
        """The newest outbound answer in a conversation (for /sources)."""
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.conversation_id == conversation_id,
                Message.direction == "out",
                Message.role == "assistant",
            )
            .order_by(col(Message.id).desc())
        )
        return res.first()

    async def recent_answers(
        self, user_id: int, conversation_id: int, limit: int = 20
    ) -> list[tuple[Message, str]]:
        """The newest outbound answers in a conversation, each with the text it answered."""
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.conversation_id == conversation_id,
                Message.direction == "out",
                Message.role == "assistant",
            )
            .order_by(col(Message.id).desc())
            .limit(limit)
        )
        out: list[tuple[Message, str]] = []
        for answer in res.all():
            asked = await self.s.get(Message, answer.reply_to_id) if answer.reply_to_id else None
            out.append((answer, asked.text if asked is not None else ""))
        return out


class ConversationRepo:
    """Finds or opens the conversation an address belongs to."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get_or_create(self, user_id: int, address: Address) -> Conversation:
        """The user's conversation at this address, created on first use."""
        thread = address.thread_id or ""
        q = select(Conversation).where(
            Conversation.user_id == user_id,
            Conversation.channel == address.channel,
            Conversation.account == address.account,
            Conversation.chat_id == address.chat_id,
            Conversation.thread_id == thread,
        )
        found = (await self.s.exec(q)).first()
        if found is not None:
            return found  # the usual case: one read, no write
        await self.s.exec(
            insert_ignore(
                self.s, Conversation, ["user_id", "channel", "account", "chat_id", "thread_id"]
            ).values(
                user_id=user_id,
                channel=address.channel,
                account=address.account,
                chat_id=address.chat_id,
                thread_id=thread,
                created_at=utcnow(),
            )
        )
        return (await self.s.exec(q)).one()

    async def touch(self, conv: Conversation, at: datetime) -> None:
        """Note that a message arrived in ``conv`` at ``at`` (one UPDATE, no flush).

        The loaded object is kept in step without being marked changed.
        """
        conn = await connection_of(self.s)
        await conn.execute(_TOUCH, {"conv_id": conv.id, "at": at})
        set_committed_value(conv, "last_message_at", at)

    async def get(self, user_id: int, conversation_id: int) -> Conversation | None:
        """The user's conversation by id (None when it is not theirs)."""
        res = await self.s.exec(
            _CONVERSATION, params={"conv_id": conversation_id, "user_id": user_id}
        )
        return res.first()

    async def thread_state(self, user_id: int, conversation_id: int) -> ThreadState | None:
        """The user's conversation's title and summary as a plain row (None when not theirs)."""
        conn = await connection_of(self.s)
        params = {"conv_id": conversation_id, "user_id": user_id}
        row = (await conn.execute(_THREAD_STATE, params)).first()
        return typing.cast("ThreadState | None", row)

    async def save_thread(
        self,
        user_id: int,
        conversation_id: int,
        *,
        title: str | None,
        summary: str | None,
        summary_through: int | None,
    ) -> None:
        """Store a thread's title and running summary (all three replace what was there)."""
        # One UPDATE, no read first: a turn that moved its history window runs it.
        conn = await connection_of(self.s)
        await conn.execute(
            _SAVE_THREAD,
            {
                "conv_id": conversation_id,
                "uid": user_id,
                "new_title": title,
                "new_summary": summary,
                "through": summary_through,
            },
        )

    async def titled(self, user_id: int, limit: int = 20) -> list[Conversation]:
        """The user's conversations that have a title, most recently used first."""
        res = await self.s.exec(
            select(Conversation)
            .where(Conversation.user_id == user_id, col(Conversation.title).is_not(None))
            .order_by(col(Conversation.last_message_at).desc(), col(Conversation.id).desc())
            .limit(limit)
        )
        return list(res.all())
