"""An exact timer for the next due push: reminders leave on time, not on the next poll.

The leader sleeps until the soonest reminder or queued push is due (looking again at least
every ``look_every`` seconds, which is how a reminder just made by another process is seen),
then fires what is due and wakes the outbox worker. Jobs with their own exact times (the
evening location scan) are run at them too. The periodic jobs stay as a backstop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from bot.clock import Clock
from bot.jobs.outbox.delivery import Outbox
from bot.jobs.reminders.service import Reminders
from storage.db import Database
from storage.repos.outbox import OutboxRepo
from storage.repos.reminders import ReminderRepo

if TYPE_CHECKING:
    from bot.jobs.engine.scheduler import JobSpec

log = logging.getLogger(__name__)


class DueTimer:
    """Wakes at the next due time and sends what is due (runs on the leader only)."""

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        reminders: Reminders,
        outbox: Outbox,
        look_every: float = 1.0,
        timed: Sequence[JobSpec] = (),
    ) -> None:
        self.db = db
        self.clock = clock
        self.reminders = reminders
        self.outbox = outbox
        self.look_every = look_every
        self.timed = [j for j in timed if j.next_due is not None]
        """Jobs run at their own exact times."""

    async def next_due(self, now: datetime) -> datetime | None:
        """The soonest time something is due: an active reminder or a future queued push."""
        async with self.db.session() as s:
            times = [
                await ReminderRepo(s).next_time(),
                await OutboxRepo(s).next_time(now),
            ]
        for job in self.timed:
            assert job.next_due is not None
            times.append(await job.next_due(now))
        found = [t for t in times if t is not None]
        return min(found) if found else None

    async def _run_timed(self, now: datetime) -> bool:
        """Run the timed jobs that are due; whether any was."""
        ran = False
        for job in self.timed:
            assert job.next_due is not None
            due = await job.next_due(now)
            if due is not None and due <= now:
                log.info("%s: %s", job.id, await job.fn(now))
                ran = True
        return ran

    async def run_forever(self) -> None:
        """Fire due work at its time until cancelled."""
        while True:
            try:
                now = self.clock.now()
                due = await self.next_due(now)
                wait = self.look_every
                if due is not None:
                    wait = min(wait, max(0.0, (due - now).total_seconds()))
                await asyncio.sleep(wait)
                if due is not None and self.clock.now() >= due:
                    fired = await self.reminders.fire_due(self.clock.now())
                    await self._run_timed(self.clock.now())
                    self.outbox.kick()
                    if not fired and wait == 0:
                        # Due but nothing to fire (a push the outbox holds back): no spinning.
                        await asyncio.sleep(self.look_every)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the due timer failed a round; looking again shortly")
                await asyncio.sleep(self.look_every)
