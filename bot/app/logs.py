"""Logging for every lifebot process: plain lines or JSON, to stderr or a file."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.config import Settings

# Third-party clients that log every request at INFO: quiet unless debugging.
NOISY = (
    "httpx", "httpx2", "httpcore", "openai", "aiosqlite", "apscheduler", "asyncio",
    "telegram", "slack_bolt", "slack_sdk", "websockets", "faster_whisper", "aiohttp",
)  # fmt: skip


def setup_logging(settings: Settings, *, quiet_console: bool = False) -> None:
    """Log to stderr; keep chat output clean when the console channel is in use."""
    level = logging.WARNING if quiet_console else getattr(logging, settings.log_level.upper(), 20)
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
