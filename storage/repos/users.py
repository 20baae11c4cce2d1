"""Users and their channel identities."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import and_, bindparam
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import ChannelIdentity, Conversation, PendingAnswer, User

# Every message runs this read: built once (with bound parameters), not per call, since
# building and keying a three-table select costs more CPU than SQLite spends running it.
_SENDER = (
    select(ChannelIdentity, User, Conversation, col(PendingAnswer.user_id))
    .join(User, col(User.id) == col(ChannelIdentity.user_id))
    .outerjoin(PendingAnswer, col(PendingAnswer.user_id) == col(ChannelIdentity.user_id))
    .outerjoin(
        Conversation,
        and_(
            col(Conversation.user_id) == col(ChannelIdentity.user_id),
            col(Conversation.channel) == bindparam("channel"),
            col(Conversation.account) == bindparam("account"),
            col(Conversation.chat_id) == bindparam("chat"),
            col(Conversation.thread_id) == bindparam("thread"),
        ),
    )
    .where(
        col(ChannelIdentity.channel) == bindparam("channel"),
        col(ChannelIdentity.account) == bindparam("account"),
        col(ChannelIdentity.sender_id) == bindparam("sender"),
    )
)


class Sender(NamedTuple):
    """What the hot path reads about a message's known sender, in one statement."""

    identity: ChannelIdentity
    """The channel identity the message came from."""
    user: User
    """Its user."""
    conversation: Conversation | None
    """The conversation at this chat (None before its first message)."""
    asked: bool
    """A question of ours waits for this user's answer (``AnswerRepo``)."""


class UserRepo:
    """Reads and writes users and channel identities."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, user_id: int) -> User | None:
        """The user with this id, or None."""
        return await self.s.get(User, user_id)

    async def owner(self) -> User | None:
        """The first owner, if one was bootstrapped."""
        res = await self.s.exec(select(User).where(col(User.is_owner)).order_by(col(User.id)))
        return res.first()

    async def all(self) -> list[User]:
        """Every user, oldest first (for the operator's CLI)."""
        return list((await self.s.exec(select(User).order_by(col(User.id)))).all())

    async def with_briefing(self) -> list[User]:
        """Users who want a morning briefing."""
        res = await self.s.exec(select(User).where(col(User.briefing_enabled)))
        return list(res.all())

    async def find_by_name(self, name: str) -> User | None:
        """A user by id (digits) or by display name, for CLI arguments."""
        if name.isdigit():
            return await self.get(int(name))
        res = await self.s.exec(
            select(User)
            .where(func.lower(User.display_name) == name.strip().lower())
            .order_by(col(User.id))
        )
        return res.first()

    async def create(
        self, display_name: str, *, is_owner: bool = False, timezone: str = "UTC"
    ) -> User:
        """Create a user."""
        user = User(display_name=display_name, is_owner=is_owner, timezone=timezone)
        self.s.add(user)
        await self.s.flush()
        return user

    async def find_identity(
        self, channel: str, account: str, sender_id: str
    ) -> ChannelIdentity | None:
        """The identity of this sender on this channel account, if known."""
        res = await self.s.exec(
            select(ChannelIdentity).where(
                ChannelIdentity.channel == channel,
                ChannelIdentity.account == account,
                ChannelIdentity.sender_id == sender_id,
            )
        )
        return res.first()

    async def sender(
        self, channel: str, account: str, sender_id: str, chat_id: str, thread_id: str = ""
    ) -> Sender | None:
        """A known sender's identity, user and conversation at this chat; None for a stranger.

        One statement for what every message needs (the hot path): the conversation is None
        when this is the first message at this chat (or thread); ``asked`` says whether a
        question of ours waits for the user's answer (usually not: nothing more to read).
        """
        res = await self.s.exec(
            _SENDER,
            params={
                "channel": channel,
                "account": account,
                "sender": sender_id,
                "chat": chat_id,
                "thread": thread_id,
            },
        )
        row = res.first()
        return Sender(row[0], row[1], row[2], row[3] is not None) if row is not None else None

    async def add_identity(
        self,
        user_id: int,
        channel: str,
        account: str,
        sender_id: str,
        *,
        chat_id: str | None = None,
        display_name: str | None = None,
    ) -> ChannelIdentity:
        """Attach a channel identity to a user."""
        ident = ChannelIdentity(
            user_id=user_id,
            channel=channel,
            account=account,
            sender_id=sender_id,
            chat_id=chat_id,
            display_name=display_name,
        )
        self.s.add(ident)
        await self.s.flush()
        return ident

    async def move_identity(self, ident: ChannelIdentity, user_id: int) -> None:
        """Hand a channel identity to another user (the console chatting as someone else)."""
        ident.user_id = user_id
        self.s.add(ident)
        await self.s.flush()

    async def create_with_identity(
        self,
        display_name: str,
        channel: str,
        account: str,
        sender_id: str,
        *,
        is_owner: bool = False,
        timezone: str = "UTC",
        chat_id: str | None = None,
        identity_name: str | None = None,
    ) -> tuple[User, ChannelIdentity]:
        """A new user with this identity, or the user who already has it.

        Insert-or-get: a person's first messages may reach several processes at once; one
        insert wins on the unique identity, the others roll their attempt back and read it.
        """
        try:
            async with self.s.begin_nested():
                user = await self.create(display_name, is_owner=is_owner, timezone=timezone)
                assert user.id is not None
                ident = await self.add_identity(
                    user.id,
                    channel,
                    account,
                    sender_id,
                    chat_id=chat_id,
                    display_name=identity_name,
                )
                return user, ident
        except IntegrityError:
            found = await self.find_identity(channel, account, sender_id)
            if found is None:
                raise
            winner = await self.get(found.user_id)
            if winner is None:
                raise
            return winner, found

    async def identities(self, user_id: int) -> list[ChannelIdentity]:
        """Every identity of one user, oldest first (the order pushes fall back in)."""
        res = await self.s.exec(
            select(ChannelIdentity)
            .where(ChannelIdentity.user_id == user_id)
            .order_by(col(ChannelIdentity.id))
        )
        return list(res.all())

    async def touch_identity(self, ident: ChannelIdentity, chat_id: str) -> None:
        """Remember where the identity last wrote from; a message proves it is reachable."""
        unchanged = ident.chat_id == chat_id and ident.unreachable_at is None
        if unchanged and ident.unreachable_reason is None:
            return  # the usual case: nothing changes, and the session stays clean
        ident.chat_id = chat_id
        ident.unreachable_at = None
        ident.unreachable_reason = None
        self.s.add(ident)

    async def mark_unreachable(
        self, user_id: int, channel: str, sender_or_chat: str, reason: str, now: datetime
    ) -> int:
        """Mark a user's identity on a channel unreachable (blocked bot, revoked token)."""
        count = 0
        for ident in await self.identities(user_id):
            if ident.channel == channel and sender_or_chat in (ident.sender_id, ident.chat_id):
                ident.unreachable_at = now
                ident.unreachable_reason = reason
                self.s.add(ident)
                count += 1
        return count

    async def set_timezone(self, user_id: int, tz: str) -> None:
        """Set the user's IANA time zone (validated by the caller)."""
        user = await self.get(user_id)
        if user is not None:
            user.timezone = tz
            self.s.add(user)
