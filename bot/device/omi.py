"""The Omi inbox: "Realtime audio bytes" chunks, stored before the webhook is answered.

Omi's cloud backend POSTs raw PCM16 little-endian mono to ``/omi/<token>?sample_rate=..&uid=..``
every N seconds (its current code as one-second POSTs, each with an ``Idempotency-Key``, retried
after 1, 5 and 30 s on a timeout or a 5xx; older versions posted once). So a
chunk is stored here (one file of the file store: a synced rename in a folder with SQLite, one
transaction with PostgreSQL, so the web page and the pendant channel may run on two hosts) and
answered at once; the device channel's feeder (``omi_feed.py``) turns chunks into session audio
afterwards, in arrival order.

A chunk moves through names, so a crash at any point is recovered without loss or double:

* ``<arrival>-<key>-<rate>.chunk``: received, not yet in a session's spool;
* ``….fed-<session>-<offset>``: being appended to that session's spool at that sample offset
  (after a crash: appended if the spool is longer than the offset, else fed again);
* ``….done``: an empty tombstone kept for an hour so that a retry of the same
  ``Idempotency-Key`` is recognised and never transcribed twice.

This module only needs the standard library and storage: the web room imports it.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from bot.clock import Clock
from storage.db import Database
from storage.files import FileStore
from storage.repos.devices import DeviceRepo

log = logging.getLogger(__name__)

MIN_RATE = 8000
MAX_RATE = 48000
MAX_CHUNK_BYTES = 8 * 1024 * 1024
"""About 4 minutes of 16 kHz audio: far above Omi's "every x seconds" chunks."""
KIND = "omi-audio"
"""The file store's kind for the inbox (declared by the Omi feature)."""
TOMBSTONE_SECONDS = 3600.0
"""How long a processed chunk's key is remembered (Omi retries within about a minute)."""

_CHUNK = re.compile(r"^(\d{20})-([0-9a-f]{32})-(\d{4,5})\.chunk$")
_FED = re.compile(r"^(\d{20})-([0-9a-f]{32})-(\d{4,5})\.fed-([A-Za-z0-9_-]{1,64})-(\d+)$")
_ANY = re.compile(r"^\d{20}-([0-9a-f]{32})-")


class Received(Enum):
    """What became of one POST."""

    STORED = "stored"
    DUPLICATE = "duplicate"
    """The same Idempotency-Key was seen before: nothing new was stored."""
    EMPTY = "empty"


class OmiRefused(Exception):
    """A POST that stores nothing: an HTTP status and a plain explanation."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"{status}: {detail}")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One received chunk waiting in the inbox."""

    key: str
    """Its key in the file store (``<device id>/<arrival>-<digest>-<rate>.chunk``)."""
    device_id: int
    sample_rate: int
    """The rate Omi named in the query string (8000 on old devices, 16000 on current ones)."""

    @property
    def name(self) -> str:
        """The file name part of the key (the arrival time, the digest, the rate, the state)."""
        return self.key.rsplit("/", 1)[-1]

    @property
    def arrived_at(self) -> datetime:
        """When the chunk was received: its audio ends then (the name starts with the time)."""
        return datetime.fromtimestamp(int(self.name[:20]) / 1e9, UTC)

    def renamed(self, suffix: str) -> Chunk:
        """The same chunk under another state (``.chunk``, ``.fed-...``, ``.done``)."""
        stem = self.name.split(".", 1)[0]
        return Chunk(f"{self.device_id}/{stem}.{suffix}", self.device_id, self.sample_rate)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A chunk being appended to a session's spool at ``offset`` (from a crashed run)."""

    chunk: Chunk
    session_id: str
    offset: int


class OmiInbox:
    """Receives Omi chunks (the web route) and hands them out in order (the feeder).

    The chunks live in the file store (kind ``omi-audio``): on PostgreSQL the process that
    answers Omi's webhook and the one that feeds the pendant channel may run on two hosts.
    """

    def __init__(self, db: Database, clock: Clock, files: FileStore) -> None:
        self.db = db
        self.clock = clock
        self.files = files
        """Where chunks are kept: one key prefix per device id."""
        self.arrived = asyncio.Event()
        """Set when a chunk was stored (the feeder also looks every second: another process
        may run the web page)."""
        self._keys: dict[int, set[str]] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self.full = False
        """Set by the spool keeper at the disk cap: chunks are refused (503, Omi retries)."""
        self._last_stamp = 0

    # --- the webhook side -------------------------------------------------------------------

    async def knows(self, token: str) -> bool:
        """True for a live device token: checked before a chunk's body is read."""
        async with self.db.session() as s:
            device = await DeviceRepo(s).authenticate(token)
        return device is not None

    async def receive(
        self, token: str, sample_rate: str | None, key: str | None, body: bytes
    ) -> Received:
        """Store one POST's body durably; OmiRefused for a wrong token or query."""
        async with self.db.session() as s:
            device = await DeviceRepo(s).authenticate(token)
            if device is None or device.id is None:
                raise OmiRefused(401, "Unknown or revoked device token.")
            await DeviceRepo(s).touch(device.id, self.clock.now())
        rate = _rate(sample_rate)
        if not body:
            return Received.EMPTY
        if self.full:
            raise OSError(errno.ENOSPC, "the audio spool reached LIFEBOT_DEVICE_SPOOL_MAX_MB")
        digest = hashlib.sha256((key or uuid.uuid4().hex).encode()).hexdigest()[:32]
        lock = self._locks.setdefault(device.id, asyncio.Lock())
        async with lock:  # a retry racing its own first try is still one chunk
            keys = self._keys.get(device.id)
            if keys is None:
                keys = await self._scan_keys(device.id)
                self._keys[device.id] = keys
            if digest in keys:
                return Received.DUPLICATE
            stamp = self._stamp()
            # Stored whole or not at all (a synced rename, or one transaction): answered
            # 2xx means kept, even through a power cut.
            name = f"{stamp:020d}-{digest}-{rate}"
            await self.files.put(KIND, f"{device.id}/{name}.chunk", body)
            keys.add(digest)
        self.arrived.set()
        return Received.STORED

    async def _scan_keys(self, device_id: int) -> set[str]:
        return {
            m.group(1)
            for info in await self.files.listing(KIND, f"{device_id}/")
            if (m := _ANY.match(info.key.rsplit("/", 1)[-1]))
        }

    def _stamp(self) -> int:
        """The arrival time in nanoseconds: it names the chunk, so it orders and dates it."""
        now = int(self.clock.now().timestamp() * 1_000_000_000)
        self._last_stamp = max(now, self._last_stamp + 1)  # two chunks never share a name
        return self._last_stamp

    # --- the feeder side --------------------------------------------------------------------

    async def is_omi(self, device_id: int) -> bool:
        """True when this device has sent audio through Omi (its answers go elsewhere)."""
        return bool(await self.files.listing(KIND, f"{int(device_id)}/"))

    async def pending(self) -> list[Chunk]:
        """Every received chunk not yet fed, oldest first."""
        out: list[Chunk] = []
        for device_id, name in await self._names():
            m = _CHUNK.match(name)
            if m:
                out.append(Chunk(f"{device_id}/{name}", device_id, int(m.group(3))))
        out.sort(key=lambda c: c.name)
        return out

    async def claimed(self) -> list[Claimed]:
        """Chunks a crashed run was appending."""
        out: list[Claimed] = []
        for device_id, name in await self._names():
            m = _FED.match(name)
            if m:
                chunk = Chunk(f"{device_id}/{name}", device_id, int(m.group(3)))
                out.append(Claimed(chunk, m.group(4), int(m.group(5))))
        out.sort(key=lambda c: c.chunk.name)
        return out

    async def read(self, chunk: Chunk) -> bytes:
        """The raw PCM16 bytes of a chunk."""
        return await self.files.get(KIND, chunk.key)

    async def claim(self, chunk: Chunk, session_id: str, offset: int) -> Chunk:
        """Mark a chunk as being appended to ``session_id`` at ``offset``."""
        target = chunk.renamed(f"fed-{session_id}-{offset}")
        await self.files.rename(KIND, chunk.key, target.key)
        return target

    async def unclaim(self, chunk: Chunk) -> Chunk:
        """Put a chunk whose append never happened back in the queue."""
        target = chunk.renamed("chunk")
        await self.files.rename(KIND, chunk.key, target.key)
        return target

    async def done(self, chunk: Chunk) -> None:
        """The chunk is in a session's spool: keep only an empty tombstone."""
        await self.files.put(KIND, chunk.renamed("done").key, b"")
        await self.files.delete(KIND, chunk.key)

    async def drop(self, chunk: Chunk) -> None:
        """Discard a chunk that must not be kept (its device was revoked)."""
        await self.done(chunk)

    async def sweep(self, now: datetime | None = None) -> int:
        """Forget tombstones older than an hour (by the wall clock the store dates files with)."""
        now = now or datetime.now(UTC)
        removed = 0
        for info in await self.files.listing(KIND):
            if not info.key.endswith((".done", ".part")):
                continue
            if (now - info.modified).total_seconds() > TOMBSTONE_SECONDS:
                removed += int(await self.files.delete(KIND, info.key))
        self._keys.clear()  # rebuilt from the store on the next POST
        return removed

    async def waiting_bytes(self, device_id: int) -> int:
        """Bytes of received chunks not yet in a session (``device status``)."""
        return sum(
            info.size
            for info in await self.files.listing(KIND, f"{int(device_id)}/")
            if (name := info.key.rsplit("/", 1)[-1]) and (_CHUNK.match(name) or _FED.match(name))
        )

    async def stored_bytes(self) -> int:
        """Bytes of everything in the inbox (the spool's cap counts them)."""
        return await self.files.total(KIND)

    async def _names(self) -> list[tuple[int, str]]:
        """(device id, file name) of everything in the inbox."""
        out = []
        for info in await self.files.listing(KIND):
            device, _, name = info.key.partition("/")
            if device.isdigit() and "/" not in name:
                out.append((int(device), name))
        return out


def _rate(raw: str | None) -> int:
    if raw is None or not raw.strip().isdigit():
        raise OmiRefused(400, "sample_rate must be in the query string, e.g. ?sample_rate=16000.")
    rate = int(raw)
    if not MIN_RATE <= rate <= MAX_RATE:
        raise OmiRefused(400, f"sample_rate must be {MIN_RATE} to {MAX_RATE}, not {rate}.")
    return rate
