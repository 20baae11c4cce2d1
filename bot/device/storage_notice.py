"""When the audio spool cannot be written, the pendant's owner is told once, in plain words.

The device gets an error frame for every refused frame (it must keep its audio); its owner gets
one message a day per pendant and problem, through the outbox like any other push (so it goes
to their preferred channel, waits out quiet hours, and is sent once even when several
processes or sessions hit the problem). ``lifebot doctor`` shows the state of the spool.
"""

from __future__ import annotations

import logging

from bot.clock import Clock
from bot.device.options import DeviceInfo
from storage.db import Database
from storage.repos.outbox import OutboxRepo, Push

log = logging.getLogger(__name__)

WHY = {
    "storage_full": "there is no room left for it",
    "storage_unavailable": "the folder it goes to cannot be written",
}
"""The error frame's code, in words for the owner."""


def notice_text(device_name: str, code: str) -> str:
    """The message for the owner."""
    why = WHY.get(code, "it cannot be written")
    return (
        f"Your pendant {device_name} is connected, but I cannot store its audio right now "
        f"({why}). It was told to keep its recordings and send them again later. Whoever runs "
        "lifebot can see what is wrong with `lifebot doctor`."
    )


async def tell_owner(db: Database, clock: Clock, device: DeviceInfo, code: str) -> bool:
    """Queue the owner's message (once per pendant, problem and UTC day); True when new.

    A database that cannot take the row either (the same full disk) is logged, not raised:
    the device already has its error frame.
    """
    now = clock.now()
    push = Push(
        user_id=device.user_id,
        kind="notice",
        key=f"spool-problem:{device.id}:{code}:{now:%Y-%m-%d}",
        due_at=now,
        text=notice_text(device.name, code),
    )
    try:
        async with db.session() as s:
            return await OutboxRepo(s).enqueue([push], now) > 0
    except Exception:
        log.exception("could not queue the spool problem notice for pendant %s", device.name)
        return False
