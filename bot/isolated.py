"""Parsing hostile input in a child process that cannot cost more than its bounds.

A parser handed a crafted file (a PDF that inflates to a gigabyte, a calendar whose repeat
rule yields a million events) can take minutes of CPU and gigabytes of memory inside a
library we do not control, and Python cannot stop a thread. So such work runs as
``python -m bot.isolated MEMORY CPU MODULE ARGS...``: the child caps its own address space
and CPU time (``setrlimit``) before importing the worker module, reads its input on stdin and
writes its answer on stdout; the parent kills it at a wall-clock deadline and stops reading
past an output cap. Whatever the input, the serving process spends at most the bounds, and
its own memory does not grow (a parser's garbage would otherwise stay in its heap).

The worker module runs as ``__main__`` with ``sys.argv = [MODULE, ARGS...]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import runpy
import sys
from dataclasses import dataclass

MEMORY_EXIT = 3
"""The child's exit status when it ran out of its memory bound."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one run may cost."""

    seconds: float
    """Wall-clock time, start-up included (the child is killed after it)."""
    memory_bytes: int
    """The child's address space (RLIMIT_AS): the interpreter and the libraries count too."""
    output_bytes: int
    """The most the child may write on stdout."""


class OverBound(Exception):
    """The work passed one of its bounds; ``limit`` names it in plain words."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


class ChildFailed(Exception):
    """The child crashed (a bug or a library error it did not turn into an answer)."""


async def run_bounded(module: str, data: bytes, bounds: Bounds, *args: str) -> bytes:
    """Run ``module`` in a bounded child with ``data`` on stdin; what it wrote on stdout.

    OverBound when it took too long, used too much memory or wrote too much; ChildFailed
    when it crashed.
    """
    cpu = max(1, int(bounds.seconds) + 1)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.isolated",
        str(bounds.memory_bytes),
        str(cpu),
        module,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(bounds.seconds):
            out, err = await asyncio.gather(
                _feed_and_read(proc, data, bounds.output_bytes), _read_all(proc.stderr)
            )
            code = await proc.wait()
    except TimeoutError:
        raise OverBound(f"it took longer than {bounds.seconds:g} seconds") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    if out is None:
        raise OverBound(f"the result was larger than {bounds.output_bytes // 1_000_000} MB")
    if code == MEMORY_EXIT:
        raise OverBound(f"it needed more than {bounds.memory_bytes // 1_000_000} MB of memory")
    if code != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise ChildFailed(f"{module} exited with {code}: {' | '.join(tail)}")
    return out


async def _feed_and_read(proc: asyncio.subprocess.Process, data: bytes, cap: int) -> bytes | None:
    """Write ``data`` to the child's stdin while reading its stdout; None past ``cap`` bytes."""
    assert proc.stdin is not None
    assert proc.stdout is not None

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(data)
            await proc.stdin.drain()
            proc.stdin.close()

    feeding = asyncio.create_task(feed())
    out = bytearray()
    try:
        while chunk := await proc.stdout.read(65536):
            out += chunk
            if len(out) > cap:
                proc.kill()
                return None
    finally:
        # A child that stops reading (killed, or done without reading it all) must not keep
        # this waiting on its pipe.
        feeding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeding
    return bytes(out)


async def _read_all(stream: asyncio.StreamReader | None) -> bytes:
    """Everything on ``stream``, keeping only the last 64 KB (for an error message)."""
    assert stream is not None
    tail = b""
    while chunk := await stream.read(65536):
        tail = (tail + chunk)[-65536:]
    return tail


def _child(argv: list[str]) -> None:
    """In the child: bound memory and CPU, then run the worker module."""
    memory, cpu, module, *rest = argv
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu)))
    sys.argv = [module, *rest]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except MemoryError:
        sys.stderr.write("out of memory (its bound)\n")
        sys.stderr.flush()
        raise SystemExit(MEMORY_EXIT) from None


if __name__ == "__main__":
    _child(sys.argv[1:])
