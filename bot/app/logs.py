"""Logging for every lifebot process: plain lines or JSON, to stderr or a file.

Every line carries who it is about (channel, user, conversation, turn) from bot.logctx.
Third-party clients that log each HTTP request at INFO (httpx, openai, PTB, Bolt...) are kept
at WARNING unless LIFEBOT_LOG_LEVEL=DEBUG. Every logger's records go through the root's one
handler (uvicorn's too: ``bot/web/server.py`` gives it no handlers of its own), and no secret
reaches a line at any level (``bot.app.logsafe``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from bot import logctx
from bot.app import logsafe
from storage.files.private import open_private, private_dir

if TYPE_CHECKING:
    from bot.config import Settings

NOISY = (
    "httpx", "httpx2", "httpcore", "openai", "aiosqlite", "apscheduler", "asyncio", "hpack",
    "telegram", "slack_bolt", "slack_sdk", "websockets", "faster_whisper", "aiohttp", "urllib3",
    "alembic.runtime.plugins", "uvicorn",
)  # fmt: skip

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class ContextFilter(logging.Filter):
    """Copy the bot.logctx fields onto each record (``record.context`` for plain lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keep the record; only annotate it."""
        fields = logctx.current()
        record.lifebot = dict(fields)
        record.context = (
            " [" + " ".join(f"{k}={v}" for k, v in fields.items()) + "]" if fields else ""
        )
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, context fields, traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single line of JSON."""
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": logsafe.clean(record.getMessage()),
        }
        out.update(getattr(record, "lifebot", {}))
        for key, value in vars(record).items():  # extra={...} given at the call site
            if key not in _STANDARD and key not in ("lifebot", "context"):
                keep = isinstance(value, int | float | bool)
                plain = value if keep else logsafe.clean(str(value))
                out.setdefault(key, plain)
        if record.exc_info:
            out["exc"] = logsafe.clean(record.exc_text or self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """One plain line; cleaned of secrets once more as a whole (``extra=`` values too)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as text, without any secret lifebot knows of."""
        return logsafe.clean(super().format(record))


PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s%(context)s"


def setup_logging(
    settings: Settings, *, to_file: Path | None = None, stream: TextIO | None = None
) -> Path | None:
    """Configure the root logger once; returns the log file when lines go to one.

    ``to_file`` is used when the console channel owns the terminal (so log lines never land
    in the middle of a chat) unless LIFEBOT_LOG_FILE names another file.
    """
    level = getattr(logging, settings.log_level)
    target = settings.log_file or to_file
    handler: logging.Handler
    if target is not None:
        # Log lines name people and quote them: the file is the owner's alone (0600), like
        # the database, even when it existed before with looser modes.
        if not target.parent.exists():
            private_dir(target.parent)
        os.close(open_private(target, "a"))
        handler = logging.FileHandler(target, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else _plain())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "lifebot", False):  # ours from an earlier call; pytest's stay
            root.removeHandler(old)
            old.close()
    setattr(handler, "lifebot", True)  # noqa: B010  # marks the handler set up here
    root.addHandler(handler)
    root.setLevel(level)
    quiet = logging.DEBUG if level <= logging.DEBUG else logging.WARNING
    for name in NOISY:
        logging.getLogger(name).setLevel(quiet)
    logsafe.install(settings)  # tokens and secrets never reach a log line, at any level
    return target


def _plain() -> logging.Formatter:
    return PlainFormatter(PLAIN)
