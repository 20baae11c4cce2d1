"""Pendants, their sessions and the utterances cut from spooled audio."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from bot.messages import Address
from storage.models import (
    AudioSegment,
    ChannelIdentity,
    Device,
    DeviceSession,
    Message,
    utcnow,
)
from storage.notify import notify_revoked
from storage.repos._upsert import add_unless_taken, insert_ignore
from storage.repos.messages import ConversationRepo

DEVICE_CHANNEL = "device"
DEVICE_ACCOUNT = "default"
TOKEN_PREFIX = "lbd_"  # noqa: S105  # a public prefix, not a secret
AMBIENT_SPEAKER = "pendant"


def hash_token(token: str) -> str:
    """The stored form of a device token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh device token (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def ambient_address(device_name: str) -> Address:
    """Where a device's ambient transcripts are kept (apart from its ask conversation)."""
    return Address(DEVICE_CHANNEL, DEVICE_ACCOUNT, f"{device_name}#ambient")


class NameTaken(ValueError):
    """A live device already has this name (names are unique: they identify the speaker)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"A pendant named {name!r} already exists: revoke it first, or pick another name."
        )


class DeviceRepo:
    """Devices and their tokens."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, device_id: int) -> Device | None:
        """A device by id."""
        return await self.s.get(Device, device_id)

    async def by_name(self, name: str) -> Device | None:
        """The live (not revoked) device of this name: names are unique among live ones."""
        res = await self.s.exec(
            select(Device).where(Device.name == name, col(Device.revoked_at).is_(None))
        )
        return res.first()

    async def add(self, user_id: int, name: str) -> tuple[Device, str]:
        """Register (or re-register one of the user's revoked) devices; return it and its token.

        The token is shown once. A name another user gave up makes a new device: their revoked
        one stays in their list. The device also becomes the user's channel identity, so
        dispatch knows who speaks. Two requests for one name at once get what they would one
        after the other: the name for one, ``NameTaken`` for the other (the unique live name
        decides; the loser's write is rolled back to a savepoint), and a revoked pendant is
        taken back only while it is still revoked (a conditional update).
        """
        token = new_token()
        if await self.by_name(name) is not None:
            raise NameTaken(name)
        res = await self.s.exec(
            select(Device)
            .where(Device.name == name, Device.user_id == user_id)
            .order_by(col(Device.id).desc())
        )
        device = res.first()
        if device is None:
            device = Device(user_id=user_id, name=name, token_hash=hash_token(token))
            refused = await add_unless_taken(self.s, device)
            if refused is not None:  # another request took the name meanwhile
                raise NameTaken(name) from refused
        else:  # the user's own revoked pendant of that name, registered again: afresh
            try:
                async with self.s.begin_nested():
                    taken_back = await self.s.exec(
                        update(Device)
                        .where(col(Device.id) == device.id, col(Device.revoked_at).is_not(None))
                        .values(
                            token_hash=hash_token(token),
                            revoked_at=None,
                            created_at=utcnow(),
                            last_seen_at=None,
                        )
                    )
            except IntegrityError as exc:  # another user's new pendant took the name meanwhile
                raise NameTaken(name) from exc
            if int(getattr(taken_back, "rowcount", 0) or 0) != 1:
                raise NameTaken(name)  # another request took it back meanwhile
            await self.s.refresh(device)
        await self._set_identity(user_id, name)
        return device, token

    async def _set_identity(self, user_id: int, name: str) -> None:
        res = await self.s.exec(
            select(ChannelIdentity).where(
                ChannelIdentity.channel == DEVICE_CHANNEL,
                ChannelIdentity.account == DEVICE_ACCOUNT,
                ChannelIdentity.sender_id == name,
            )
        )
        ident = res.first()
        if ident is None:
            ident = ChannelIdentity(
                user_id=user_id,
                channel=DEVICE_CHANNEL,
                account=DEVICE_ACCOUNT,
                sender_id=name,
                chat_id=name,
                display_name=name,
            )
        ident.user_id = user_id
        ident.unreachable_at = None
        ident.unreachable_reason = None
        self.s.add(ident)
        await self.s.flush()

    async def revoke(self, name: str, now: datetime) -> Device | None:
        """Invalidate a device's token and unlink its identity; None when unknown."""
        device = await self.by_name(name)
        if device is None or device.revoked_at is not None:
            return None
        device.revoked_at = now
        device.token_hash = ""
        self.s.add(device)
        res = await self.s.exec(
            select(ChannelIdentity).where(
                ChannelIdentity.channel == DEVICE_CHANNEL,
                ChannelIdentity.account == DEVICE_ACCOUNT,
                ChannelIdentity.sender_id == name,
            )
        )
        for ident in res.all():
            await self.s.delete(ident)
        # Its sessions end too: a device re-added later (maybe for someone else) starts afresh.
        sessions = await self.s.exec(
            select(DeviceSession).where(
                DeviceSession.device_id == device.id, col(DeviceSession.closed_at).is_(None)
            )
        )
        for sess in sessions.all():
            sess.closed_at = now
            self.s.add(sess)
        if self.s.bind is not None and self.s.bind.dialect.name == "postgresql":
            # Delivered at commit: the process holding its socket closes it at once.
            assert device.id is not None
            await notify_revoked(self.s, device.id)
        return device

    async def token_hashes(self, device_ids: list[int]) -> dict[int, str]:
        """The current token digest of each device; revoked ones map to ``""``."""
        if not device_ids:
            return {}
        res = await self.s.exec(
            select(Device.id, Device.token_hash, Device.revoked_at).where(
                col(Device.id).in_(device_ids)
            )
        )
        return {
            int(i): (digest if revoked is None else "")
            for i, digest, revoked in res.all()
            if i is not None
        }

    async def authenticate(self, token: str) -> Device | None:
        """The active device this token belongs to, or None."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        digest = hash_token(token)
        res = await self.s.exec(
            select(Device).where(Device.token_hash == digest, col(Device.revoked_at).is_(None))
        )
        device = res.first()
        # The lookup is by digest; compare again in constant time as a belt-and-braces check.
        if device is None or not hmac.compare_digest(device.token_hash, digest):
            return None
        return device

    async def active(self) -> list[Device]:
        """Every device that is not revoked."""
        res = await self.s.exec(
            select(Device).where(col(Device.revoked_at).is_(None)).order_by(col(Device.id))
        )
        return list(res.all())

    async def all(self) -> list[Device]:
        """Every device, revoked ones too (for ``lifebot device status``)."""
        return list((await self.s.exec(select(Device).order_by(col(Device.id)))).all())

    async def touch(self, device_id: int, now: datetime) -> None:
        """Record that the device was heard from."""
        device = await self.s.get(Device, device_id)
        if device is not None:
            device.last_seen_at = now
            self.s.add(device)


class SessionRepo:
    """Device sessions and their utterances."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def get(self, session_id: str) -> DeviceSession | None:
        """A session by id."""
        return await self.s.get(DeviceSession, session_id)

    async def segment(self, segment_id: int) -> AudioSegment | None:
        """An utterance's audio segment by id."""
        return await self.s.get(AudioSegment, segment_id)

    async def latest_open(self, device_id: int) -> DeviceSession | None:
        """The device's newest session that was not closed."""
        res = await self.s.exec(
            select(DeviceSession)
            .where(DeviceSession.device_id == device_id, col(DeviceSession.closed_at).is_(None))
            .order_by(col(DeviceSession.last_seen_at).desc())
        )
        return res.first()

    async def open_sessions(self) -> list[DeviceSession]:
        """Sessions that are not closed (recovery and housekeeping look at these)."""
        res = await self.s.exec(select(DeviceSession).where(col(DeviceSession.closed_at).is_(None)))
        return list(res.all())

    async def all_sessions(self) -> list[DeviceSession]:
        """Every session (status and housekeeping)."""
        return list((await self.s.exec(select(DeviceSession))).all())

    async def close_others(self, device_id: int, keep: str, now: datetime) -> list[str]:
        """Close the device's other open sessions; return their ids."""
        res = await self.s.exec(
            select(DeviceSession).where(
                DeviceSession.device_id == device_id,
                DeviceSession.id != keep,
                col(DeviceSession.closed_at).is_(None),
            )
        )
        closed = []
        for row in res.all():
            row.closed_at = now
            self.s.add(row)
            closed.append(row.id)
        return closed

    async def add_segment(
        self, sess: DeviceSession, start: int, end: int, mode: str, spoken_at: datetime
    ) -> AudioSegment:
        """Record a cut utterance and move the session's cursor past it (one transaction)."""
        seg = AudioSegment(
            session_id=sess.id,
            user_id=sess.user_id,
            seq=sess.next_seq,
            start_sample=start,
            end_sample=end,
            mode=mode,
            spoken_at=spoken_at,
        )
        sess.next_seq += 1
        sess.vad_cursor = max(sess.vad_cursor, end)
        self.s.add(seg)
        self.s.add(sess)
        await self.s.flush()
        return seg

    async def unfinished(self, session_id: str, max_attempts: int) -> list[AudioSegment]:
        """A session's utterances still to transcribe, in order."""
        res = await self.s.exec(
            select(AudioSegment)
            .where(
                AudioSegment.session_id == session_id,
                col(AudioSegment.status).in_(["pending", "failed"]),
                AudioSegment.attempts < max_attempts,
            )
            .order_by(col(AudioSegment.seq))
        )
        return list(res.all())

    async def count_unfinished(self, session_id: str) -> tuple[int, int]:
        """(utterances, samples) waiting for transcription in a session."""
        res = await self.s.exec(
            select(AudioSegment).where(
                AudioSegment.session_id == session_id,
                col(AudioSegment.status).in_(["pending", "failed"]),
            )
        )
        rows = res.all()
        return len(rows), sum(r.end_sample - r.start_sample for r in rows)

    async def finish(
        self, segment_id: int, status: str, text: str, now: datetime, error: str | None = None
    ) -> None:
        """Mark an utterance transcribed (done/empty) or failed."""
        seg = await self.s.get(AudioSegment, segment_id)
        if seg is None:
            return
        seg.status = status
        seg.text = text
        seg.error = error
        seg.attempts += 1
        seg.transcribed_at = now
        self.s.add(seg)

    async def store_ambient(
        self, device_name: str, seg: AudioSegment, text: str, meta: dict[str, Any]
    ) -> int | None:
        """Keep an ambient transcript as the user's message; once per utterance."""
        address = ambient_address(device_name)
        conv = await ConversationRepo(self.s).get_or_create(seg.user_id, address)
        assert conv.id is not None
        key = f"{DEVICE_CHANNEL}:{DEVICE_ACCOUNT}:{address.chat_id}:{seg.session_id}:{seg.seq}"
        stmt = (
            insert_ignore(self.s, Message, ["dedupe_key"])
            .values(
                user_id=seg.user_id,
                conversation_id=conv.id,
                direction="in",
                role="user",
                channel=DEVICE_CHANNEL,
                account=DEVICE_ACCOUNT,
                chat_id=address.chat_id,
                sender_id=AMBIENT_SPEAKER,
                external_id=f"{seg.session_id}:{seg.seq}",
                dedupe_key=key,
                text=text,
                status="stored",
                meta=meta,
                created_at=seg.spoken_at,
            )
            .returning(Message.__table__.c.id)  # type: ignore[attr-defined]
        )
        row = (await self.s.exec(stmt)).first()
        if conv.last_message_at is None or conv.last_message_at < seg.spoken_at:
            conv.last_message_at = seg.spoken_at
            self.s.add(conv)
        return int(row[0]) if row is not None else None
