"""Queries of the web room: sign-in links, sessions, API and calendar tokens, listings.

The listings are what its pages show (timeline, conversation around a turn, outbox, jobs).
Export and delete-my-data are ``storage.portable``'s, shared with the CLI. Every user-facing
query filters by the caller's user id.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import func, text, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.db import Database, migration_chain
from storage.models import (
    ApiToken,
    AudioSegment,
    Delivery,
    Device,
    DocumentChunk,
    Fact,
    IcsToken,
    JobLease,
    JobState,
    Message,
    ServerKey,
    WebLoginLink,
    WebSession,
)
from storage.repos._upsert import insert_ignore


def digest(secret: str) -> str:
    """SHA-256 hex of a secret (secrets are 256-bit random, so a fast hash suffices)."""
    return hashlib.sha256(secret.encode()).hexdigest()


class WebAuthRepo:
    """Links, sessions and tokens; secrets arrive in clear and are stored hashed."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add_link(self, user_id: int, secret: str, now: datetime, expires: datetime) -> None:
        """Store a new one-time sign-in link."""
        self.s.add(
            WebLoginLink(
                user_id=user_id, token_hash=digest(secret), created_at=now, expires_at=expires
            )
        )
        await self.s.flush()

    async def links_since(self, user_id: int, since: datetime) -> int:
        """How many links the user asked for since ``since`` (the rate limit)."""
        res = await self.s.exec(
            select(func.count()).where(
                WebLoginLink.user_id == user_id, col(WebLoginLink.created_at) >= since
            )
        )
        return int(res.one())

    async def use_link(self, secret: str, now: datetime) -> int | None:
        """Spend a valid link; its user id, or None (unknown, used or expired)."""
        stmt = (
            update(WebLoginLink)
            .where(
                col(WebLoginLink.token_hash) == digest(secret),
                col(WebLoginLink.used_at).is_(None),
                col(WebLoginLink.expires_at) > now,
            )
            .values(used_at=now)
        )
        result = await self.s.exec(stmt)
        if int(getattr(result, "rowcount", 0) or 0) != 1:
            return None
        res = await self.s.exec(
            select(WebLoginLink.user_id).where(WebLoginLink.token_hash == digest(secret))
        )
        return int(res.one())

    async def add_session(
        self, user_id: int, secret: str, csrf: str, now: datetime, expires: datetime
    ) -> WebSession:
        """Store a new browser session."""
        row = WebSession(
            user_id=user_id,
            token_hash=digest(secret),
            csrf=csrf,
            created_at=now,
            expires_at=expires,
        )
        self.s.add(row)
        await self.s.flush()
        return row

    async def session(self, secret: str, now: datetime) -> WebSession | None:
        """The live session this cookie secret belongs to."""
        res = await self.s.exec(
            select(WebSession).where(
                WebSession.token_hash == digest(secret),
                col(WebSession.revoked_at).is_(None),
                col(WebSession.expires_at) > now,
            )
        )
        return res.first()

    async def end_session(self, session_id: int, now: datetime) -> None:
        """Sign one browser out."""
        await self.s.exec(
            update(WebSession).where(col(WebSession.id) == session_id).values(revoked_at=now)
        )

    async def set_flash(self, session_id: int, value: dict[str, Any] | None) -> None:
        """Keep what a form post said for the session's next page (None clears it)."""
        await self.s.exec(
            update(WebSession).where(col(WebSession.id) == session_id).values(flash=value)
        )

    async def end_all_sessions(self, user_id: int, now: datetime) -> None:
        """Sign out everywhere: every session of the user ends."""
        await self.s.exec(
            update(WebSession)
            .where(col(WebSession.user_id) == user_id, col(WebSession.revoked_at).is_(None))
            .values(revoked_at=now)
        )

    async def add_api_token(
        self, user_id: int, name: str, secret: str, now: datetime, scope: str = "read"
    ) -> ApiToken:
        """Store a new API token (``scope``: ``read`` or ``write``)."""
        row = ApiToken(
            user_id=user_id,
            name=name,
            token_hash=digest(secret),
            hint=secret[:8],
            created_at=now,
            scope=scope,
        )
        self.s.add(row)
        await self.s.flush()
        return row

    async def api_tokens(self, user_id: int) -> list[ApiToken]:
        """The user's live API tokens."""
        res = await self.s.exec(
            select(ApiToken)
            .where(ApiToken.user_id == user_id, col(ApiToken.revoked_at).is_(None))
            .order_by(col(ApiToken.id))
        )
        return list(res.all())

    async def revoke_api_token(self, user_id: int, token_id: int, now: datetime) -> bool:
        """Revoke one of the user's tokens; False when it is not theirs or already revoked."""
        result = await self.s.exec(
            update(ApiToken)
            .where(
                col(ApiToken.id) == token_id,
                col(ApiToken.user_id) == user_id,
                col(ApiToken.revoked_at).is_(None),
            )
            .values(revoked_at=now)
        )
        return int(getattr(result, "rowcount", 0) or 0) == 1

    async def api_token(self, secret: str, now: datetime) -> ApiToken | None:
        """The live API token with this secret (and note that it was used), or None."""
        res = await self.s.exec(
            select(ApiToken).where(
                ApiToken.token_hash == digest(secret), col(ApiToken.revoked_at).is_(None)
            )
        )
        row = res.first()
        if row is None:
            return None
        row.last_used_at = now
        self.s.add(row)
        return row

    async def set_ics_token(self, user_id: int, secret: str, now: datetime) -> None:
        """Replace the user's calendar feed secret (the old URL stops working)."""
        await self.revoke_ics(user_id, now)
        self.s.add(IcsToken(user_id=user_id, token_hash=digest(secret), created_at=now))
        await self.s.flush()

    async def revoke_ics(self, user_id: int, now: datetime) -> None:
        """Turn the user's calendar feed off."""
        await self.s.exec(
            update(IcsToken)
            .where(col(IcsToken.user_id) == user_id, col(IcsToken.revoked_at).is_(None))
            .values(revoked_at=now)
        )

    async def has_ics(self, user_id: int) -> bool:
        """True when the user has a live calendar feed."""
        res = await self.s.exec(
            select(IcsToken.id).where(
                IcsToken.user_id == user_id, col(IcsToken.revoked_at).is_(None)
            )
        )
        return res.first() is not None

    async def ics_user(self, secret: str) -> int | None:
        """The user whose calendar feed this secret opens."""
        res = await self.s.exec(
            select(IcsToken.user_id).where(
                IcsToken.token_hash == digest(secret), col(IcsToken.revoked_at).is_(None)
            )
        )
        found = res.first()
        return int(found) if found is not None else None

    async def server_key(self, name: str, fresh: str, now: datetime) -> str:
        """The key called ``name``, kept as ``fresh`` when there was none yet.

        Insert-if-absent, then read: processes starting together all end up with the key
        that was kept first.
        """
        await self.s.exec(
            insert_ignore(self.s, ServerKey, ["name"]).values(
                name=name, value=fresh, created_at=now
            )
        )
        kept = await self.s.get(ServerKey, name)
        assert kept is not None
        return kept.value


class Credentials:
    """The web's credentials, one transaction per call: what the sign-in service keeps.

    ``bot.web.auth.WebAuth`` takes this by constructor (as its ``CredentialStore``), so the
    web room itself never opens a session on these tables.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    async def server_key(self, name: str, fresh: str, now: datetime) -> str:
        """The key kept under ``name`` (``fresh`` is kept the first time)."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).server_key(name, fresh, now)

    async def add_link(
        self,
        user_id: int,
        secret: str,
        now: datetime,
        expires: datetime,
        *,
        since: datetime,
        limit: int,
    ) -> bool:
        """Keep a sign-in link, unless ``limit`` links were made since ``since`` (False)."""
        async with self.db.session() as s:
            repo = WebAuthRepo(s)
            if await repo.links_since(user_id, since) >= limit:
                return False
            await repo.add_link(user_id, secret, now, expires)
            return True

    async def open_session(
        self, link_secret: str, secret: str, csrf: str, now: datetime, expires: datetime
    ) -> int | None:
        """Spend a link and open a session with it; its user, or None for a spent link."""
        async with self.db.session() as s:
            repo = WebAuthRepo(s)
            user_id = await repo.use_link(link_secret, now)
            if user_id is None:
                return None
            await repo.add_session(user_id, secret, csrf, now, expires)
            return user_id

    async def session(self, secret: str, now: datetime) -> WebSession | None:
        """The live session of a secret."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).session(secret, now)

    async def end_session(self, session_id: int, now: datetime) -> None:
        """End one session."""
        async with self.db.session() as s:
            await WebAuthRepo(s).end_session(session_id, now)

    async def end_all_sessions(self, user_id: int, now: datetime) -> None:
        """End every session of the user."""
        async with self.db.session() as s:
            await WebAuthRepo(s).end_all_sessions(user_id, now)

    async def set_flash(self, session_id: int, value: dict[str, Any] | None) -> None:
        """Keep (or clear) a session's flash value."""
        async with self.db.session() as s:
            await WebAuthRepo(s).set_flash(session_id, value)

    async def add_api_token(
        self, user_id: int, name: str, secret: str, now: datetime, scope: str
    ) -> ApiToken:
        """Keep a new API token (its hash)."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).add_api_token(user_id, name, secret, now, scope)

    async def api_tokens(self, user_id: int) -> list[ApiToken]:
        """The user's live API tokens."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).api_tokens(user_id)

    async def revoke_api_token(self, user_id: int, token_id: int, now: datetime) -> bool:
        """Revoke one of the user's API tokens."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).revoke_api_token(user_id, token_id, now)

    async def api_token(self, secret: str, now: datetime) -> ApiToken | None:
        """The live token of a secret."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).api_token(secret, now)

    async def set_ics_token(self, user_id: int, secret: str, now: datetime) -> None:
        """Make ``secret`` the user's calendar feed secret."""
        async with self.db.session() as s:
            await WebAuthRepo(s).set_ics_token(user_id, secret, now)

    async def revoke_ics(self, user_id: int, now: datetime) -> None:
        """Turn the user's calendar feed off."""
        async with self.db.session() as s:
            await WebAuthRepo(s).revoke_ics(user_id, now)

    async def has_ics(self, user_id: int) -> bool:
        """True when the user's calendar feed is on."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).has_ics(user_id)

    async def ics_user(self, secret: str) -> int | None:
        """The user whose feed this secret opens."""
        async with self.db.session() as s:
            return await WebAuthRepo(s).ics_user(secret)


class WebViewRepo:
    """Listings the pages show; user-scoped unless the name says ``all``."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def fact(self, user_id: int, fact_id: int) -> Fact | None:
        """One of the user's facts (forgotten ones too)."""
        res = await self.s.exec(select(Fact).where(Fact.id == fact_id, Fact.user_id == user_id))
        return res.first()

    async def messages(self, user_id: int, ids: list[int]) -> list[Message]:
        """The user's messages with these ids, oldest first."""
        if not ids:
            return []
        res = await self.s.exec(
            select(Message)
            .where(Message.user_id == user_id, col(Message.id).in_(ids))
            .order_by(col(Message.created_at), col(Message.id))
        )
        return list(res.all())

    async def spoken_between(self, user_id: int, start: datetime, end: datetime) -> list[Message]:
        """What the user and lifebot said between two instants (no tool traffic)."""
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                col(Message.direction).in_(("in", "out")),
                col(Message.created_at) >= start,
                col(Message.created_at) < end,
            )
            .order_by(col(Message.created_at), col(Message.id))
        )
        return list(res.all())

    async def around(self, user_id: int, message: Message, each_side: int) -> list[Message]:
        """Messages of the same conversation around ``message`` (no tool traffic)."""
        base = select(Message).where(
            Message.user_id == user_id,
            col(Message.direction).in_(("in", "out")),
            Message.conversation_id == message.conversation_id,
            Message.channel == message.channel,
        )
        before = await self.s.exec(
            base.where(col(Message.id) < message.id)
            .order_by(col(Message.id).desc())
            .limit(each_side)
        )
        after = await self.s.exec(
            base.where(col(Message.id) >= message.id).order_by(col(Message.id)).limit(each_side + 1)
        )
        return [*reversed(list(before.all())), *after.all()]

    async def chat(self, user_id: int, conversation_id: int, limit: int) -> list[Message]:
        """The last ``limit`` messages said in one conversation, oldest first (no tool traffic).

        In the order stored (as ``MessageRepo.history``): a reply always follows its question.
        """
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.conversation_id == conversation_id,
                col(Message.direction).in_(("in", "out")),
                col(Message.status) != "refused",
            )
            .order_by(col(Message.id).desc())
            .limit(limit)
        )
        return list(reversed(res.all()))

    async def waiting(self, user_id: int, limit: int) -> list[Message]:
        """The user's messages waiting for /retry (model down, or a crash), newest first."""
        res = await self.s.exec(
            select(Message)
            .where(
                Message.user_id == user_id,
                Message.direction == "in",
                Message.status == "pending_retry",
            )
            .order_by(col(Message.id).desc())
            .limit(limit)
        )
        return list(res.all())

    async def chunk_messages(self, user_id: int, chunk_ids: list[int]) -> dict[int, int]:
        """Document piece id -> the message its document came with (the user's pieces only)."""
        if not chunk_ids:
            return {}
        res = await self.s.exec(
            select(DocumentChunk.id, DocumentChunk.message_id).where(
                DocumentChunk.user_id == user_id, col(DocumentChunk.id).in_(chunk_ids)
            )
        )
        return {int(cid): int(mid) for cid, mid in res.all() if cid is not None}

    async def days_with_messages(self, user_id: int, limit: int) -> list[datetime]:
        """The instants of the user's most recent messages, newest first (for a day list)."""
        res = await self.s.exec(
            select(Message.created_at)
            .where(Message.user_id == user_id, col(Message.direction).in_(("in", "out")))
            .order_by(col(Message.created_at).desc())
            .limit(limit)
        )
        return list(res.all())

    async def devices(self, user_id: int) -> list[Device]:
        """The user's devices, newest first."""
        res = await self.s.exec(
            select(Device).where(Device.user_id == user_id).order_by(col(Device.id).desc())
        )
        return list(res.all())

    async def audio_waiting(self, user_id: int) -> int:
        """Utterances of the user's devices waiting to be transcribed."""
        res = await self.s.exec(
            select(func.count()).where(
                AudioSegment.user_id == user_id, AudioSegment.status == "pending"
            )
        )
        return int(res.one())

    async def audio_waiting_all(self) -> int:
        """Utterances of every device waiting to be transcribed (metrics)."""
        res = await self.s.exec(select(func.count()).where(AudioSegment.status == "pending"))
        return int(res.one())

    async def all_deliveries(self, limit: int) -> list[Delivery]:
        """The newest pushes of every user (owner page)."""
        res = await self.s.exec(select(Delivery).order_by(col(Delivery.id).desc()).limit(limit))
        return list(res.all())

    async def retry_failed(self, delivery_id: int, now: datetime) -> bool:
        """Put a failed push back in the queue, due now."""
        result = await self.s.exec(
            update(Delivery)
            .where(col(Delivery.id) == delivery_id, col(Delivery.status) == "failed")
            .values(status="pending", due_at=now, claimed_at=None)
        )
        return int(getattr(result, "rowcount", 0) or 0) == 1

    async def outbox_depth(self) -> dict[str, int]:
        """Pushes per status, every kind."""
        res = await self.s.exec(select(Delivery.status, func.count()).group_by(Delivery.status))
        return {str(status): int(n) for status, n in res.all()}

    async def unanswered(self) -> list[tuple[str, str, int]]:
        """(channel, status, count) of messages in that got no answer (failed or waiting)."""
        res = await self.s.exec(
            select(Message.channel, Message.status, func.count())
            .where(
                Message.direction == "in",
                col(Message.status).in_(("pending_retry", "failed")),
            )
            .group_by(Message.channel, Message.status)
        )
        return [(str(c), str(st), int(n)) for c, st, n in res.all()]

    async def jobs(self) -> list[JobState]:
        """Every scheduled job's last run."""
        return list((await self.s.exec(select(JobState).order_by(col(JobState.id)))).all())

    async def leases(self) -> list[JobLease]:
        """Leader leases (one row per lease name, on every database)."""
        return list((await self.s.exec(select(JobLease))).all())

    async def schema_revision(self) -> str | None:
        """The migration the database is at."""
        res = await self.s.exec(text("SELECT version_num FROM alembic_version"))  # type: ignore[call-overload]
        row = res.first()
        return str(row[0]) if row else None

    async def live_leases(self, now: datetime) -> list[JobLease]:
        """Leader leases still held at ``now``."""
        res = await self.s.exec(select(JobLease).where(col(JobLease.expires_at) > now))
        return list(res.all())


def head_revision() -> str | None:
    """The newest migration shipped with this code (reads the migration files: call off-loop)."""
    chain = migration_chain()
    return chain[-1] if chain else None
