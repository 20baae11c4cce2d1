"""Secrets never reach a log line, whatever the level and whichever library logs them.

python-telegram-bot logs request URLs (which hold the bot token) at DEBUG, httpx logs headers,
and a device token may appear in an error. A filter on every handler replaces each configured
secret, and anything shaped like a device token, before a line is written.
"""

from __future__ import annotations

import logging
import re

from bot.config import Settings

_DEVICE_TOKEN = re.compile(r"lbd_[A-Za-z0-9_\-]{8,}")
_REDACTED = "[redacted]"


class RedactSecrets(logging.Filter):
    """Rewrites a record's message with every secret replaced by ``[redacted]``."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact in place; never drops a record."""
        text = record.getMessage()
        clean = text
        for secret in self.secrets:
            clean = clean.replace(secret, _REDACTED)
        clean = _DEVICE_TOKEN.sub("lbd_" + _REDACTED, clean)
        if clean != text:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            for secret in self.secrets:
                record.exc_text = record.exc_text.replace(secret, _REDACTED)
            record.exc_text = _DEVICE_TOKEN.sub("lbd_" + _REDACTED, record.exc_text)
        return True


def secrets_of(settings: Settings) -> list[str]:
    """Every credential in the settings."""
    values = [
        settings.telegram_bot_token,
        settings.telegram_webhook_secret,
        settings.slack_bot_token,
        settings.slack_app_token,
        settings.slack_signing_secret,
        settings.openai_api_key,
    ]
    return [v for v in values if v]


def install(settings: Settings) -> None:
    """Put the filter on every handler of the root logger."""
    redact = RedactSecrets(secrets_of(settings))
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
