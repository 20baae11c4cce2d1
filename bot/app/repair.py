"""What ``lifebot doctor --fix`` repairs, and who holds a port (blocking helpers: run in threads).

Each repair reports every change as it makes it, through the ``echo`` it is given, so the
operator reads exactly what was done.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

Echo = Callable[[str], object]
"""Where a repair says what it did (one line per change)."""

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def too_open(path: Path) -> bool:
    """True when someone other than the owner may read, write or enter ``path``."""
    mode = path.lstat().st_mode
    return not stat.S_ISLNK(mode) and bool(stat.S_IMODE(mode) & 0o077)


def _walk(root: Path) -> Iterator[Path]:
    """``root`` and everything under it, symlinks listed but never followed."""
    yield root
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            yield Path(folder) / name


def open_paths(root: Path, also: list[Path] | None = None) -> list[Path]:
    """Folders and files under ``root`` (plus ``also``) that others may read or enter."""
    found = [p for p in _walk(root) if too_open(p)] if root.exists() else []
    found += [p for p in also or [] if p.exists() and too_open(p)]
    return found


def make_private(paths: list[Path], echo: Echo) -> int:
    """Give folders 0700 and files 0600, saying each change; returns how many changed."""
    changed = 0
    for path in paths:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        new = PRIVATE_DIR if stat.S_ISDIR(mode) else PRIVATE_FILE
        old = stat.S_IMODE(mode)
        path.chmod(new)
        echo(f"fixed: {path} was {old:04o}, now {new:04o}")
        changed += 1
    return changed


def create_private_dir(path: Path, echo: Echo) -> None:
    """Create the data folder (and parents) readable by its owner only, saying so."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR)
    echo(f"fixed: created {path} (0700)")


@dataclass(frozen=True, slots=True)
class PortHolder:
    """A process listening on a port, as far as this machine lets us see it."""

    pid: int | None
    """Its process id (None when another user's process hides it)."""
    command: str
    """Its command line, or a note when it cannot be read."""


def port_is_free(host: str, port: int) -> bool:
    """True when this process could listen on ``host``:``port`` right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def holder_of(port: int) -> PortHolder | None:
    """Who listens on TCP ``port`` (Linux: /proc/net/tcp and each process's sockets)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return PortHolder(int(entry.name), _command(entry))
    return PortHolder(None, "a process this user may not inspect (run doctor as root to see it)")


def _listening_inodes(port: int) -> set[str]:
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.add(inode)
    return found


def _command(entry: Path) -> str:
    try:
        raw = (entry / "cmdline").read_bytes()
    except OSError:
        return "(command line not readable)"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip() or "(no command line)"
