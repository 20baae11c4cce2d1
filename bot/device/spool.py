"""The durable audio spool: every received sample is on disk before anything else happens.

One file per session under ``<data_dir>/spool/`` (a host-local working folder, 0700, files
0600: only the process holding the pendant's socket writes and reads it; see
docs/architecture.md), raw 16 kHz mono int16, append-only. A sample's
offset in the file is its time in the session, so an utterance is just (start, end) offsets and
the database only ever stores offsets. Writes go to the OS at once (a killed process loses
nothing); ``sync`` forces them to the disk (for power loss) and runs in a worker thread.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from bot.device.audio import TARGET_RATE
from storage.files.private import open_private, private_dir

BYTES_PER_SAMPLE = 2
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Spool:
    """The folder of session audio files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.full = False
        """Set by the spool keeper at its disk cap: new audio is refused (ENOSPC)."""

    def path(self, session_id: str) -> Path:
        """The audio file of a session (ids are checked: they come from the network)."""
        if not _SESSION_ID.match(session_id):
            raise ValueError(f"not a session id: {session_id!r}")
        return self.root / f"{session_id}.pcm"

    def open(self, session_id: str) -> SpoolFile:
        """Open (or create) a session's audio file for appending (0700 folder, 0600 file)."""
        private_dir(self.root)
        return SpoolFile(self.path(session_id))

    def samples(self, session_id: str) -> int:
        """How many samples a session's file holds (0 when there is none)."""
        try:
            return self.path(session_id).stat().st_size // BYTES_PER_SAMPLE
        except FileNotFoundError:
            return 0

    def read(self, session_id: str, start: int, end: int) -> npt.NDArray[np.float32]:
        """Samples [start, end) of a session as float32 in [-1, 1] (blocking file I/O)."""
        return read_samples(self.path(session_id), start, end)

    def delete(self, session_id: str) -> None:
        """Remove a session's audio once it is fully transcribed."""
        self.path(session_id).unlink(missing_ok=True)

    def bytes_waiting(self, session_id: str, cursor: int) -> int:
        """Bytes past ``cursor`` that no utterance covers yet."""
        return max(0, self.samples(session_id) - cursor) * BYTES_PER_SAMPLE


def read_samples(path: Path, start: int, end: int) -> npt.NDArray[np.float32]:
    """Samples [start, end) of a spool file as float32 (short if the file is shorter)."""
    if end <= start:
        return np.zeros(0, dtype=np.float32)
    with path.open("rb") as f:
        f.seek(start * BYTES_PER_SAMPLE)
        data = f.read((end - start) * BYTES_PER_SAMPLE)
    data = data[: len(data) - len(data) % BYTES_PER_SAMPLE]
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


class SpoolFile:
    """One session's audio file, open for appending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = os.fdopen(open_private(path, "ab"), "ab")
        size = self._file.tell()
        if size % BYTES_PER_SAMPLE:
            # A torn write from a crash: drop the half sample so offsets stay aligned.
            self._file.truncate(size - size % BYTES_PER_SAMPLE)
            self._file.seek(0, os.SEEK_END)
        self.samples = self._file.tell() // BYTES_PER_SAMPLE
        """Samples in the file: the session's timeline length."""
        self._unsynced = 0

    @property
    def seconds(self) -> float:
        """The session's audio length in seconds."""
        return self.samples / TARGET_RATE

    def append(self, samples: npt.NDArray[np.int16]) -> int:
        """Write samples and hand them to the OS; return the new length in samples."""
        if samples.size:
            self._file.write(samples.astype("<i2", copy=False).tobytes())
            # flush() puts the bytes in the OS page cache: from here a crash of this
            # process (kill -9 included) cannot lose them.
            self._file.flush()
            self.samples += int(samples.size)
            self._unsynced += int(samples.size)
        return self.samples

    @property
    def unsynced_seconds(self) -> float:
        """Audio written since the last ``sync``."""
        return self._unsynced / TARGET_RATE

    def sync(self) -> None:
        """Force written audio to the disk (blocking: call through asyncio.to_thread)."""
        if not self._file.closed:
            os.fsync(self._file.fileno())
        self._unsynced = 0

    def close(self) -> None:
        """Sync and close."""
        if not self._file.closed:
            self.sync()
            self._file.close()
