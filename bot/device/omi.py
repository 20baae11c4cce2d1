"""The Omi inbox: "Realtime audio bytes" chunks, on disk before the webhook is answered.

Omi's cloud backend POSTs raw PCM16 little-endian mono to ``/omi/<token>?sample_rate=..&uid=..``
every N seconds and only waits 15 s for an answer, retrying a chunk that was not answered. So a
chunk is written here (one file, renamed into place, synced) and answered at once; the device
channel's feeder (``omi_feed.py``) turns chunks into session audio afterwards, in arrival order.

A chunk file moves through names, so a crash at any point is recovered without loss or double:

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
import os
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from bot.clock import Clock
from storage.db import Database
from storage.repos.devices import DeviceRepo

log = logging.getLogger(__name__)

MIN_RATE = 8000
MAX_RATE = 48000
MAX_CHUNK_BYTES = 8 * 1024 * 1024
"""About 4 minutes of 16 kHz audio: far above Omi's "every x seconds" chunks."""
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

    path: Path
    device_id: int
    sample_rate: int
    """The rate Omi named in the query string (8000 on old devices, 16000 on current ones)."""

    def read(self) -> bytes:
        """The raw PCM16 bytes (blocking file I/O)."""
        return self.path.read_bytes()

    @property
    def arrived_at(self) -> datetime:
        """When the chunk was received: its audio ends then (the name starts with the time)."""
        return datetime.fromtimestamp(int(self.path.name[:20]) / 1e9, UTC)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A chunk being appended to a session's spool at ``offset`` (from a crashed run)."""

    chunk: Chunk
    session_id: str
    offset: int


class OmiInbox:
    """Receives Omi chunks (the web route) and hands them out in order (the feeder)."""

    def __init__(self, db: Database, clock: Clock, root: Path) -> None:
        self.db = db
        self.clock = clock
        self.root = root
        """``<data_dir>/spool/omi``: one folder per device id."""
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
                keys = await asyncio.to_thread(self._scan_keys, device.id)
                self._keys[device.id] = keys
            if digest in keys:
                return Received.DUPLICATE
            stamp = self._stamp()
            await asyncio.to_thread(self._write, device.id, digest, rate, body, stamp)
            keys.add(digest)
        self.arrived.set()
        return Received.STORED

    def _scan_keys(self, device_id: int) -> set[str]:
        folder = self.root / str(device_id)
        if not folder.is_dir():
            return set()
        # A ``.part`` is a write that was never answered: its retry must be stored, not refused.
        return {
            m.group(1)
            for p in folder.iterdir()
            if not p.name.endswith(".part") and (m := _ANY.match(p.name))
        }

    def _stamp(self) -> int:
        """The arrival time in nanoseconds: it names the chunk, so it orders and dates it."""
        now = int(self.clock.now().timestamp() * 1_000_000_000)
        self._last_stamp = max(now, self._last_stamp + 1)  # two chunks never share a name
        return self._last_stamp

    def _write(self, device_id: int, digest: str, rate: int, body: bytes, stamp: int) -> None:
        folder = self.root / str(device_id)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{stamp:020d}-{digest}-{rate}"
        tmp = folder / f"{name}.part"
        with tmp.open("wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())  # answered 2xx means kept, even through a power cut
        tmp.rename(folder / f"{name}.chunk")
        _sync_dir(folder)

    # --- the feeder side --------------------------------------------------------------------

    def is_omi(self, device_id: int) -> bool:
        """True when this device has sent audio through Omi (its answers go elsewhere)."""
        return (self.root / str(device_id)).is_dir()

    def pending(self) -> list[Chunk]:
        """Every received chunk not yet fed, oldest first (blocking directory scan)."""
        out: list[Chunk] = []
        for folder in self._folders():
            for p in folder.iterdir():
                m = _CHUNK.match(p.name)
                if m:
                    out.append(Chunk(p, int(folder.name), int(m.group(3))))
        out.sort(key=lambda c: c.path.name)
        return out

    def claimed(self) -> list[Claimed]:
        """Chunks a crashed run was appending (blocking directory scan)."""
        out: list[Claimed] = []
        for folder in self._folders():
            for p in folder.iterdir():
                m = _FED.match(p.name)
                if m:
                    chunk = Chunk(p, int(folder.name), int(m.group(3)))
                    out.append(Claimed(chunk, m.group(4), int(m.group(5))))
        out.sort(key=lambda c: c.chunk.path.name)
        return out

    @staticmethod
    def claim(chunk: Chunk, session_id: str, offset: int) -> Chunk:
        """Mark a chunk as being appended to ``session_id`` at ``offset`` (blocking)."""
        stem = chunk.path.name.split(".", 1)[0]
        target = chunk.path.with_name(f"{stem}.fed-{session_id}-{offset}")
        chunk.path.rename(target)
        return Chunk(target, chunk.device_id, chunk.sample_rate)

    @staticmethod
    def unclaim(chunk: Chunk) -> Chunk:
        """Put a chunk whose append never happened back in the queue (blocking)."""
        stem = chunk.path.name.split(".", 1)[0]
        target = chunk.path.with_name(f"{stem}.chunk")
        chunk.path.rename(target)
        return Chunk(target, chunk.device_id, chunk.sample_rate)

    @staticmethod
    def done(chunk: Chunk) -> None:
        """The chunk is in a session's spool: keep only an empty tombstone (blocking)."""
        stem = chunk.path.name.split(".", 1)[0]
        tomb = chunk.path.with_name(f"{stem}.done")
        tomb.touch()
        chunk.path.unlink()

    def drop(self, chunk: Chunk) -> None:
        """Discard a chunk that must not be kept (its device was revoked) (blocking)."""
        self.done(chunk)

    def sweep(self, now: float | None = None) -> int:
        """Forget tombstones older than an hour and leftovers of torn writes (blocking)."""
        now = time.time() if now is None else now
        removed = 0
        for folder in self._folders():
            for p in folder.iterdir():
                if not p.name.endswith((".done", ".part")):
                    continue
                try:
                    if now - p.stat().st_mtime > TOMBSTONE_SECONDS:
                        p.unlink()
                        removed += 1
                except FileNotFoundError:
                    continue
        self._keys.clear()  # rebuilt from the folder on the next POST
        return removed

    def waiting_bytes(self, device_id: int) -> int:
        """Bytes of received chunks not yet in a session (``device status``; blocking)."""
        folder = self.root / str(device_id)
        if not folder.is_dir():
            return 0
        return sum(
            p.stat().st_size for p in folder.iterdir() if _CHUNK.match(p.name) or _FED.match(p.name)
        )

    def _folders(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.is_dir() and p.name.isdigit()]


def _rate(raw: str | None) -> int:
    if raw is None or not raw.strip().isdigit():
        raise OmiRefused(400, "sample_rate must be in the query string, e.g. ?sample_rate=16000.")
    rate = int(raw)
    if not MIN_RATE <= rate <= MAX_RATE:
        raise OmiRefused(400, f"sample_rate must be {MIN_RATE} to {MAX_RATE}, not {rate}.")
    return rate


def _sync_dir(folder: Path) -> None:
    """Make a rename durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
