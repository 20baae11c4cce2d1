"""The spool's disk cap: processed audio goes first, unprocessed audio never, a warning early.

Every ``check_seconds`` the keeper adds up ``DATA_DIR/spool`` (session audio), the Omi
inbox and the audio kept with ``LIFEBOT_DEVICE_KEEP_AUDIO`` (both in the file store). Over the
cap, it deletes audio that is fully processed, oldest session first: spool files of closed
sessions whose every utterance is transcribed (left when a deletion was missed), then kept
audio. Audio not yet transcribed is
never deleted: if the cap is still reached, new audio is refused (pendants get
``storage_full`` and keep it; Omi's backend gets 503 and retries) until there is room again.
A warning is logged once the spool passes ``warn_ratio`` of the cap, before anything is refused.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from bot.device.feature import DEVICE_AUDIO
from bot.device.hub import DeviceHub
from bot.device.omi import OmiInbox
from storage.repos.devices import SessionRepo

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SpoolUsage:
    """The spool's size against its cap after one check."""

    used: int
    """Bytes on disk under the spool folder."""
    cap: int
    """The cap in bytes (0: none)."""
    freed: int = 0
    """Bytes of processed audio deleted by this check."""

    @property
    def full(self) -> bool:
        """New audio must be refused."""
        return self.cap > 0 and self.used >= self.cap


def spool_bytes(root: Path) -> int:
    """Bytes of every file under ``root`` (blocking directory walk)."""
    if not root.is_dir():
        return 0
    total = 0
    for path in root.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except FileNotFoundError:
            continue  # deleted while we looked
    return total


class SpoolKeeper:
    """Keeps the spool under its cap (see the module docstring)."""

    def __init__(
        self,
        hub: DeviceHub,
        inbox: OmiInbox | None,
        cap_bytes: int,
        *,
        warn_ratio: float = 0.8,
        check_seconds: float = 30.0,
    ) -> None:
        self.hub = hub
        self.inbox = inbox
        self.cap = cap_bytes
        self.warn_ratio = warn_ratio
        self.check_seconds = check_seconds
        self._warned = False
        self._task: asyncio.Task[None] | None = None
        # One check at a time: two that overlap both see the spool over its cap and each
        # frees "the oldest", so together they delete more than was needed.
        self._checking = asyncio.Lock()

    async def start(self) -> None:
        """Check now, then every ``check_seconds``."""
        if self.cap <= 0:
            return
        await self.check()
        self._task = asyncio.create_task(self._run(), name="spool-keeper")

    async def stop(self) -> None:
        """Stop checking."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.check_seconds)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("checking the spool's size failed")

    async def check(self) -> SpoolUsage:
        """Measure, free processed audio when over the cap, warn, and set the full flags."""
        async with self._checking:
            return await self._check()

    async def _check(self) -> SpoolUsage:
        root = self.hub.spool.root
        used = await asyncio.to_thread(spool_bytes, root)
        if self.inbox is not None:
            used += await self.inbox.stored_bytes()
        files = self.hub.files
        if files is not None:
            used += await files.total(DEVICE_AUDIO.name)
        freed = 0
        if self.cap > 0 and used > self.cap:
            freed = await self._free(used - int(self.cap * 0.9))
            used -= freed
        usage = SpoolUsage(used, self.cap, freed)
        self._report(usage)
        self.hub.spool.full = usage.full
        if self.inbox is not None:
            self.inbox.full = usage.full
        return usage

    async def _free(self, wanted: int) -> int:
        """Delete fully processed session audio, oldest first, until ``wanted`` bytes are gone."""
        async with self.hub.db.session() as s:
            repo = SessionRepo(s)
            closed = [r for r in await repo.all_sessions() if r.closed_at is not None]
            closed.sort(key=lambda r: r.started_at)
            done: list[str] = []
            for row in closed:
                waiting, _ = await repo.count_unfinished(row.id)
                if waiting == 0 and self.hub.spool.samples(row.id) <= row.vad_cursor:
                    done.append(row.id)
        freed = 0
        for session_id in done:
            if freed >= wanted:
                break
            if session_id in self.hub.sessions:
                continue  # still in memory: a pipeline may be finishing it
            path = self.hub.spool.path(session_id)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            await asyncio.to_thread(path.unlink, missing_ok=True)
            freed += size
            log.info(
                "spool cap: deleted %d bytes of transcribed audio (session %s)", size, session_id
            )
        return freed + await self._free_kept(wanted - freed)

    async def _free_kept(self, wanted: int) -> int:
        """Delete kept session audio from the file store, oldest first."""
        files = self.hub.files
        if files is None or wanted <= 0:
            return 0
        freed = 0
        kept = sorted(await files.listing(DEVICE_AUDIO.name), key=lambda f: f.modified)
        for info in kept:
            if freed >= wanted:
                break
            if await files.delete(DEVICE_AUDIO.name, info.key):
                freed += info.size
                log.info("spool cap: deleted %d bytes of kept audio (%s)", info.size, info.key)
        return freed

    def _report(self, usage: SpoolUsage) -> None:
        if self.cap <= 0:
            return
        share = usage.used / self.cap
        if usage.full:
            log.error(
                "the audio spool is full (%.0f of %.0f MB) and holds only audio not yet "
                "transcribed: new audio is refused until transcription catches up or "
                "LIFEBOT_DEVICE_SPOOL_MAX_MB is raised",
                usage.used / 1e6,
                self.cap / 1e6,
            )
            self._warned = True
        elif share >= self.warn_ratio and not self._warned:
            log.warning(
                "the audio spool uses %.0f%% of its %.0f MB cap (LIFEBOT_DEVICE_SPOOL_MAX_MB); "
                "transcribed audio is deleted first when it is reached",
                share * 100,
                self.cap / 1e6,
            )
            self._warned = True
        elif share < self.warn_ratio * 0.9:
            self._warned = False  # warn again on the next crossing
