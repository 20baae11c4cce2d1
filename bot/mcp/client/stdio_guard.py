"""A small relay between lifebot and an MCP server run over stdio: no line past a size cap.

``python stdio_guard.py [--pid-file PATH] MAX_BYTES COMMAND [ARGS...]`` (run as a file)
starts COMMAND with the same environment and working directory, passes lifebot's bytes to its
stdin untouched, and passes its stdout back as it comes, never holding more than one read of
it. When one line (one JSON-RPC message) grows past MAX_BYTES it says so on stderr (the
server's log), stops the server and exits with ``LINE_TOO_LONG``.

Why a process of its own: the SDK's stdio reader keeps an unfinished line in memory and joins
it again with every chunk read, on lifebot's event loop. A server that writes one endless line
(a bug, or a hostile server) would grow lifebot's memory without end and spend ever more of
the loop's time copying it, so every chat would slow down. Bounding the line here, before the
SDK sees it, keeps that cost to at most one capped line, and keeps the SDK's own transport
(process start, shutdown order, process-group kill) as it is: the SDK starts this relay as
the leader of a new process group, and the server runs in that group too.

Only the standard library is imported, so the relay starts in a few tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

LINE_TOO_LONG = 3
"""Exit code when the server wrote a line longer than the cap (the server is stopped)."""
CHUNK = 1 << 16
"""Bytes read at a time from either side."""


def _pump_stdin(child: subprocess.Popen[bytes]) -> None:
    """Lifebot's requests to the server, byte for byte; the server's stdin closes at EOF."""
    assert child.stdin is not None
    try:
        while chunk := os.read(0, CHUNK):
            child.stdin.write(chunk)
            child.stdin.flush()
    except (BrokenPipeError, OSError):
        pass  # the server is gone: its stdout's end tells the other side
    finally:
        with contextlib.suppress(OSError):  # BrokenPipeError is one
            child.stdin.close()


def relay(max_bytes: int, command: list[str]) -> int:
    """Run ``command`` behind the cap; its exit code, or ``LINE_TOO_LONG``."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # noqa: S603  (the operator's own server command)
    assert child.stdout is not None
    threading.Thread(target=_pump_stdin, args=(child,), daemon=True).start()
    line = 0  # bytes of the current, unfinished line
    out = child.stdout.fileno()
    while chunk := os.read(out, CHUNK):
        end = chunk.rfind(b"\n")
        line = len(chunk) - end - 1 if end >= 0 else line + len(chunk)
        if line > max_bytes:
            sys.stderr.write(
                f"lifebot: this server wrote a message longer than {max_bytes // (1 << 20)} MB "
                "without ending it; it was stopped\n"
            )
            sys.stderr.flush()
            child.kill()
            child.wait()
            return LINE_TOO_LONG
        try:
            _write_all(1, chunk)
        except BrokenPipeError:  # lifebot closed its end: stop the server with it
            child.kill()
            break
    return child.wait()


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte (a pipe may take a large write in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main(argv: list[str]) -> int:
    """Entry point: ``[--pid-file PATH] MAX_BYTES COMMAND [ARGS...]``.

    ``--pid-file``: write this relay's pid there first. The SDK starts the relay as the leader
    of a new process group, so it is the group's id too: lifebot ends the whole group at once
    when the server failed a health check (a frozen server would only wait out the grace).
    """
    if argv[:1] == ["--pid-file"] and len(argv) > 1:
        Path(argv[1]).write_text(f"{os.getpid()}\n", encoding="ascii")
        argv = argv[2:]
    if len(argv) < 2 or not argv[0].isdigit():
        sys.stderr.write("usage: stdio_guard.py [--pid-file PATH] MAX_BYTES COMMAND [ARGS...]\n")
        return 2
    return relay(int(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
