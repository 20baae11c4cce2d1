"""Secrets never reach a log line, whatever the level and whichever library logs them (issue 28).

What to hide is read from the features' declarations (``Feature.secrets``): the values of the
settings they name (tokens, keys, the database password) and the shapes of secrets made at
run time (a location token, a sign-in link, a calendar feed address). A feature that brings a
new secret declares it, and every log line is cleaned of it from then on.

It is applied in two places, so no handler and no logger is left out:

- **when a record is made** (the logging module's record factory): every record of every
  logger at every level (lifebot's, uvicorn's, APScheduler's, httpx's, python-telegram-bot's)
  has its message, its traceback and its stack cleaned before any handler sees it, whoever
  added that handler;
- **when lifebot writes a line** (its formatters): the finished line is cleaned once more,
  for values a call site attaches with ``extra=`` after the record was made.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from bot.app.features import REGISTRY
from bot.config import Settings
from bot.feature import Registry

REDACTED = "[redacted]"
_MIN_LENGTH = 6
"""Shorter setting values are not replaced: they would blank out ordinary words."""


class Redactor:
    """Replaces known secret values and secret shapes in text."""

    def __init__(self, values: Iterable[str], shapes: Iterable[re.Pattern[str]]) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self.values = sorted({v for v in values if len(v) >= _MIN_LENGTH}, key=len, reverse=True)
        """Secret values from the settings."""
        self.shapes = list(shapes)
        """Secret shapes; a pattern's first group (a prefix such as ``lbl_``) is kept."""

    def clean(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted]``."""
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        for shape in self.shapes:
            text = shape.sub(_keep_prefix, text)
        return text

    def clean_record(self, record: logging.LogRecord) -> None:
        """Clean a record's message, traceback and stack in place; never drops it."""
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001  # a bad format string: logging reports it when written
            return
        clean = self.clean(text)
        if clean != text:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
        if record.stack_info:
            record.stack_info = self.clean(record.stack_info)


def _keep_prefix(match: re.Match[str]) -> str:
    kept = match.group(1) if match.re.groups and match.group(1) else ""
    return kept + REDACTED


def redactor_for(settings: Settings | None, registry: Registry = REGISTRY) -> Redactor:
    """The redactor of every secret ``registry`` declares, with the values in ``settings``."""
    values: list[str] = []
    for secret in registry.secrets():
        if secret.setting and settings is not None:
            value: Any = getattr(settings, secret.setting, None)
            if hasattr(value, "get_secret_value"):  # a pydantic SecretStr
                value = value.get_secret_value()
            if value:
                values.append(str(value))
    shapes = [p for p in (s.pattern() for s in registry.secrets()) if p is not None]
    return Redactor(values, shapes)


_current = redactor_for(None)
"""The redactor in force: the declared shapes until ``install`` adds the settings' values."""
_base_factory = logging.getLogRecordFactory()


def clean(text: str) -> str:
    """``text`` without any secret lifebot knows of (for formatters and other writers)."""
    return _current.clean(text)


def _make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _base_factory(*args, **kwargs)
    _current.clean_record(record)
    return record


def install(settings: Settings) -> Redactor:
    """Clean every record made from now on, by any logger, of every declared secret."""
    global _current  # noqa: PLW0603  # one redactor per process, like the logging config
    _current = redactor_for(settings)
    logging.setLogRecordFactory(_make_record)
    return _current
