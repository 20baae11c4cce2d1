"""Positions shared in chat (Telegram location and live location) -> the location service.

Dispatch hands every message carrying a ``SharedLocation`` here instead of to the agent. Every
update of a live location is stored; only the first message of a share gets an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.chat import InputContext, InputOutcome
from bot.feature import Input
from bot.location.geo import Fix, valid_coordinates
from bot.location.service import LocationOff, LocationService
from bot.messages import InboundMessage, SharedLocation
from storage.models import User


class ChatLocation:
    """The location feature's handler of shared positions (``Input.LOCATION``).

    Stores them before anything else (a position is never a message in the history, never
    the agent's); answers the first message of a share in plain words. A stranger's first
    share takes the normal path (pairing); a stranger's live updates are dropped.
    """

    kind = Input.LOCATION
    before_storing = True

    def __init__(self, location: LocationService) -> None:
        self.location = location

    def takes(self, msg: InboundMessage) -> bool:
        """A message carrying a shared position."""
        return msg.location is not None

    async def take(self, ctx: InputContext) -> InputOutcome:
        """Store the position of a known sender; the words to answer with, if any."""
        shared = ctx.msg.location
        assert shared is not None
        if ctx.user is None:
            return InputOutcome(go_on=not shared.update)
        return InputOutcome(notice=await self.store(ctx.user, shared))

    async def again(self, meta: dict[str, Any] | None) -> Sequence[str]:
        """Positions are never stored as messages: nothing to retry with."""
        return ()

    async def store(self, user: User, shared: SharedLocation) -> str | None:
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
