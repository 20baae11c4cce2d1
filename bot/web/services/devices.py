"""The Devices page's and API's operations: the pendants each user registered."""

from __future__ import annotations

from bot.device.registry import DeviceRegistry
from storage.models import Device, User


class WebDevices:
    """Pendants of one user at a time (another user's device is not found)."""

    def __init__(self, registry: DeviceRegistry) -> None:
        self.registry = registry
        """The pendants of every user (the ingest endpoint authenticates a device's token)."""

    async def devices(self, user: User) -> list[Device]:
        """The user's pendants (revoked ones too, marked)."""
        assert user.id is not None
        return await self.registry.of(user.id)

    async def audio_waiting(self, user: User) -> int:
        """Utterances still to transcribe."""
        assert user.id is not None
        return await self.registry.audio_waiting(user.id)

    async def add_device(self, user: User, name: str) -> tuple[Device, str]:
        """Register a pendant; its token is returned once. ValueError in plain words."""
        assert user.id is not None
        name = name.strip()
        if not name or len(name) > 40 or not all(c.isalnum() or c in "-_." for c in name):
            raise ValueError("A device name is 1 to 40 letters, digits, '-', '_' or '.'.")
        return await self.registry.add(user.id, name)

    async def revoke_device(self, user: User, device_id: int) -> Device | None:
        """Revoke one of the user's devices; None when it is not theirs or already revoked."""
        assert user.id is not None
        return await self.registry.revoke(user.id, device_id)
