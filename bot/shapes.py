"""Reading JSON whose shape nobody promised: a model's answer, a webhook's body, an export file.

A number where a list goes, an object where words go: each is treated as absent, so what was
well formed is still used and nothing fails on a ``TypeError`` or shows a stray JSON text.
"""

from __future__ import annotations

from typing import Any


def words(value: object) -> str:
    """The words in a field, on one line; empty for anything but a string.

    A number, a list or an object where words go (``{"title": {"text": ...}}``) is not a
    title or a name: shown as its JSON it would read as nonsense.
    """
    return " ".join(value.split()) if isinstance(value, str) else ""


def items(value: object) -> list[Any]:
    """The items of a field that should hold a list; none when it holds anything else."""
    return value if isinstance(value, list) else []
