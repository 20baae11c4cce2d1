"""Secrets never reach a log line, whatever the level and whichever library logs them.

python-telegram-bot logs request URLs (which hold the bot token) at DEBUG, httpx logs headers,
and a device token may appear in an error. A filter on every handler replaces each configured
secret, and anything shaped like a device token, before a line is written.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from bot.app.features import REGISTRY
from bot.config import Settings
from bot.feature import Registry

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


class Redactor:
    """Replaces every declared secret (setting values and shapes) in a text."""

    def __init__(self, values: Iterable[str], shapes: Iterable[re.Pattern[str]]) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self.values = sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)
        """Secret values from the settings (shorter ones would blank out ordinary words)."""
        self.shapes = list(shapes)
        """Secret shapes; a pattern's first group (a prefix such as ``lbk_``) is kept."""

    def clean(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted]``."""
        for value in self.values:
            text = text.replace(value, _REDACTED)
        for shape in self.shapes:
            text = shape.sub(_keep_prefix, text)
        return text


def _keep_prefix(match: re.Match[str]) -> str:
    kept = match.group(1) if match.re.groups and match.group(1) else ""
    return kept + _REDACTED


def redactor_for(settings: Settings | None, registry: Registry = REGISTRY) -> Redactor:
    """A redactor of every secret the features declare, with its values in ``settings``.

    What the owner's page cleans every log line and setting with (issue 31); the handlers'
    filter above still cleans the credentials ``secrets_of`` names.
    """
    values: list[str] = []
    for secret in registry.secrets():
        if secret.setting and settings is not None:
            value = getattr(settings, secret.setting, None)
            if value:
                values.append(str(value))
    shapes = [p for p in (s.pattern() for s in registry.secrets()) if p is not None]
    return Redactor(values, shapes)


def install(settings: Settings) -> None:
    """Put the filter on every handler of the root logger."""
    redact = RedactSecrets(secrets_of(settings))
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
