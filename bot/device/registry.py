"""The pendants a user has registered (the device feature's service for the pages and API).

Registering and revoking a pendant and authenticating a token go through here, each call its
own transaction; the pendant channel itself checks tokens in ``bot.device.server``.
"""

from __future__ import annotations

from bot.clock import Clock
from storage.db import Database
from storage.models import Device
from storage.repos.devices import DeviceRepo, NameTaken
from storage.repos.web import WebViewRepo

__all__ = ["DeviceRegistry", "NameTaken"]


class DeviceRegistry:
    """Register, list and revoke a user's pendants."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    async def of(self, user_id: int) -> list[Device]:
        """The user's pendants (revoked ones too, marked)."""
        async with self.db.session() as s:
            return await WebViewRepo(s).devices(user_id)

    async def audio_waiting(self, user_id: int) -> int:
        """The user's utterances still to transcribe."""
        async with self.db.session() as s:
            return await WebViewRepo(s).audio_waiting(user_id)

    async def audio_waiting_all(self) -> int:
        """Utterances still to transcribe, of everyone (a metric)."""
        async with self.db.session() as s:
            return await WebViewRepo(s).audio_waiting_all()

    async def add(self, user_id: int, name: str) -> tuple[Device, str]:
        """Register a pendant; its token is returned once (``NameTaken`` when in use)."""
        async with self.db.session() as s:
            return await DeviceRepo(s).add(user_id, name)

    async def revoke(self, user_id: int, device_id: int) -> Device | None:
        """Revoke one of the user's pendants; None when not theirs or already revoked."""
        async with self.db.session() as s:
            mine = {d.id: d for d in await WebViewRepo(s).devices(user_id)}
            device = mine.get(device_id)
            if device is None or device.revoked_at is not None:
                return None
            return await DeviceRepo(s).revoke(device.name, self.clock.now())

    async def authenticate(self, token: str) -> Device | None:
        """The live pendant this token belongs to, or None."""
        async with self.db.session() as s:
            return await DeviceRepo(s).authenticate(token)
