"""This process's newest log lines, kept in memory for the owner's page (issue 31).

A logging handler on the root logger keeps the last few hundred lines, each cleaned of
secrets by the redaction it is given (``bot.app.logsafe``) before it is kept. The page reads
this process's lines from here, at once; the heartbeat (``bot.jobs.engine.presence``) copies them
to the database, where a page served by another process reads them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot import logctx

MAX_CHARS = 2000
"""A line longer than this (a long traceback) is cut, saying so."""


@dataclass(frozen=True, slots=True)
class LogLine:
    """One log line as kept."""

    seq: int
    """Its number in this process's order, from 1."""
    at: datetime
    level: str
    logger: str
    text: str
    """The message with its context fields and traceback, secrets redacted."""


def _no_redaction(text: str) -> str:
    return text


class LogRing(logging.Handler):
    """Keeps the newest ``size`` lines (thread-safe: jobs and workers log from threads)."""

    def __init__(self, size: int = 500, redact: Callable[[str], str] = _no_redaction) -> None:
        super().__init__()
        self._lines: deque[LogLine] = deque(maxlen=size)
        self._seq = 0
        self._guard = threading.Lock()
        self.redact = redact
        """Cleans a line of every secret before it is kept."""

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record as one line (never raises: logging must not break the caller)."""
        try:
            text = record.getMessage()
            fields = logctx.current()
            if fields:
                text += " [" + " ".join(f"{k}={v}" for k, v in fields.items()) + "]"
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                text += "\n" + record.exc_text
            if len(text) > MAX_CHARS:
                text = text[:MAX_CHARS] + " … (cut)"
            text = self.redact(text)
            at = datetime.fromtimestamp(record.created, UTC)
            with self._guard:
                self._seq += 1
                self._lines.append(LogLine(self._seq, at, record.levelname, record.name, text))
        except Exception:  # noqa: BLE001  # logging's own convention: report, never raise
            self.handleError(record)

    def newest(self, limit: int) -> list[LogLine]:
        """The newest ``limit`` lines, oldest first."""
        with self._guard:
            lines = list(self._lines)
        return lines[-limit:] if limit > 0 else []

    def after(self, seq: int) -> list[LogLine]:
        """Lines numbered above ``seq`` (those still kept), oldest first."""
        with self._guard:
            return [line for line in self._lines if line.seq > seq]


_RING: LogRing | None = None


def process_ring(redact: Callable[[str], str]) -> LogRing:
    """This process's ring on the root logger, cleaning every line with ``redact``.

    Made and attached at the first call. A later call with another redaction (an app built
    again with other secrets: tests, or a CLI command that builds twice) replaces the ring
    on the root logger with a new one rather than changing the one others already hold.
    """
    global _RING  # noqa: PLW0603  # one per process, like the logging configuration itself
    root = logging.getLogger()
    if _RING is None or _RING.redact != redact:
        if _RING is not None:
            root.removeHandler(_RING)
        _RING = LogRing(redact=redact)
    if _RING not in root.handlers:
        root.addHandler(_RING)
    return _RING
