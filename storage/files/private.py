"""Folders and files only their owner may read: 0700 and 0600, whatever the umask says.

Everything lifebot keeps is personal (audio, pictures, documents, logs with names in them),
so every folder it creates is 0700 and every file 0600, like the live database. These helpers
are blocking: call them from a worker thread on the event loop's behalf.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) as 0700 folders; an existing ``path`` becomes 0700.

    Parents that existed already keep their mode: they may be the user's own folders.
    """
    missing: list[Path] = []
    at = path
    while not at.exists():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by someone else meanwhile
            folder.mkdir(mode=DIR_MODE)
        folder.chmod(DIR_MODE)
    if not missing and path.is_dir() and (path.stat().st_mode & 0o777) != DIR_MODE:
        path.chmod(DIR_MODE)  # made by an older lifebot with 0755
    return path


def open_private(path: Path, mode: str = "wb") -> int:
    """A file descriptor for ``path`` created 0600 (an existing file is made 0600 too)."""
    flags = os.O_WRONLY | os.O_CREAT
    flags |= os.O_APPEND if "a" in mode else os.O_TRUNC
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def write_private(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``path`` whole and atomically (a temporary name, then a rename), 0600.

    Readers see the old content or the new, never half; ``sync`` makes it survive a power cut.
    """
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        sync_dir(path.parent)


def sync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
