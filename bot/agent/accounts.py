"""Users, their linked channels and pending pairings, as the pages read and change them.

Pairing and linking themselves (approving a stranger, confirming a link code) are identity's
(``bot.dispatch.identity``), the same for the chat's commands and the owner's page; this is
the rest: reading users and their channels, saving a user's schedule settings, listing what
waits for an answer and refusing a pairing. Each call is its own transaction.
"""

from __future__ import annotations

from datetime import datetime

from storage.db import Database
from storage.models import ChannelIdentity, PairingRequest, User
from storage.repos.pairing import PairingRepo
from storage.repos.users import UserRepo


class Accounts:
    """Users and pairings for the pages (the owner's page and each user's settings)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def user(self, user_id: int) -> User | None:
        """The user, or None when they were deleted."""
        async with self.db.session() as s:
            return await UserRepo(s).get(user_id)

    async def identities(self, user_id: int) -> list[ChannelIdentity]:
        """The user's linked channels."""
        async with self.db.session() as s:
            return await UserRepo(s).identities(user_id)

    async def every(self) -> list[tuple[User, list[ChannelIdentity]]]:
        """Every user with their linked channels."""
        async with self.db.session() as s:
            repo = UserRepo(s)
            return [(u, await repo.identities(u.id or 0)) for u in await repo.all()]

    async def save(self, user_id: int, values: dict[str, object]) -> User:
        """Set the user's fields named in ``values``; the user as stored."""
        async with self.db.session() as s:
            fresh = await UserRepo(s).get(user_id)
            assert fresh is not None
            for key, value in values.items():
                setattr(fresh, key, value)
            s.add(fresh)
        return fresh

    async def link_questions(self, user_id: int, now: datetime) -> list[PairingRequest]:
        """Chats waiting for this user's Yes or No before they are linked."""
        async with self.db.session() as s:
            return await PairingRepo(s).link_questions(user_id, now)

    async def pairings(self, now: datetime) -> list[PairingRequest]:
        """Pending requests of strangers to use lifebot."""
        async with self.db.session() as s:
            return [r for r in await PairingRepo(s).pending(now) if r.purpose == "pair"]

    async def refuse(self, code: str, now: datetime) -> PairingRequest | None:
        """Refuse a pending pairing; None when the code is not pending."""
        async with self.db.session() as s:
            repo = PairingRepo(s)
            req = await repo.by_code(code, now, purpose="pair")
            if req is not None:
                await repo.close(req, "refused")
            return req
