"""A real CalDAV server (Radicale from PyPI) on loopback for the calendar tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def radicale(folder: Path, users: dict[str, str]) -> Iterator[str]:
    """Run Radicale with its storage in ``folder`` and plain htpasswd ``users``; its base URL."""
    folder.mkdir(parents=True, exist_ok=True)
    htpasswd = folder / "users"
    htpasswd.write_text("".join(f"{u}:{p}\n" for u, p in users.items()))
    port = _free_port()
    proc = subprocess.Popen(  # our own interpreter and fixed arguments
        [
            sys.executable,
            "-m",
            "radicale",
            "--config",
            "",
            "--server-hosts",
            f"127.0.0.1:{port}",
            "--storage-filesystem-folder",
            str(folder / "collections"),
            "--auth-type",
            "htpasswd",
            "--auth-htpasswd-filename",
            str(htpasswd),
            "--auth-htpasswd-encryption",
            "plain",
            # Radicale holds every 401 for a second (against password guessing), and a CalDAV
            # client's first request to a calendar goes without credentials and gets one: a
            # second per connection that tested nothing of ours. Refusals are still refusals.
            "--auth-delay",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("radicale did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
