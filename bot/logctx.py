"""Who a log line is about: channel, user, conversation and turn, carried in a contextvar.

``bind`` sets fields for the code it wraps (and every task that code starts); ``add`` adds
fields inside an enclosing ``bind``, which drops them again when it ends. Log handlers read
``current()`` (bot/app/logs.py puts them on every line).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_FIELDS: ContextVar[dict[str, str | int]] = ContextVar("lifebot_log_fields", default={})  # noqa: B039  # never mutated: every change sets a new dict


@contextmanager
def bind(**fields: str | int | None) -> Iterator[None]:
    """Tag every log line written inside the block with ``fields`` (None values skipped)."""
    token = _FIELDS.set({**_FIELDS.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _FIELDS.reset(token)


def add(**fields: str | int | None) -> None:
    """Add fields to the current ``bind`` block (e.g. the user once identity is known)."""
    _FIELDS.set({**_FIELDS.get(), **{k: v for k, v in fields.items() if v is not None}})


def current() -> dict[str, str | int]:
    """The fields in effect here."""
    return _FIELDS.get()
