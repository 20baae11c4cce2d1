"""Positions shared in chat (Telegram location and live location) -> the location service.

Dispatch hands every message carrying a ``SharedLocation`` here instead of to the agent. Every
update of a live location is stored; only the first message of a share gets an answer.
"""

from __future__ import annotations

from bot.location.geo import Fix, valid_coordinates
from bot.location.service import LocationOff, LocationService
from bot.messages import SharedLocation
from storage.models import User


class ChatLocation:
    """Stores shared positions; answers the first message of a share in plain words."""

    def __init__(self, location: LocationService) -> None:
        self.location = location

    async def __call__(self, user: User, shared: SharedLocation) -> str | None:
        """Store one shared position; the reply to send, or None to stay silent."""
        assert user.id is not None
        if not valid_coordinates(shared.lat, shared.lon):
            return None if shared.update else "That location has impossible coordinates."
        fix = Fix(shared.ts, shared.lat, shared.lon, shared.accuracy_m)
        try:
            await self.location.ingest(user.id, [fix], "telegram")
        except LocationOff:
            if shared.update:
                return None
            return (
                "Location history is off, so I did not keep that. Send /location on first "
                "if you want me to remember where you have been."
            )
        if shared.update:
            return None
        if shared.live:
            return "Recording your live location while you share it. /location off stops it."
        return "Noted where you are. /place add NAME names this place."
