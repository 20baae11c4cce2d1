"""The one typed encoder: database values to JSON and back, for export, import and backup.

Every value a column can hold is written as plain JSON: times and dates as ISO 8601 text,
decimals as text (no float rounding), bytes as base64, UUIDs as text, enums as their value.
What a value was is not guessed from its text on the way back: each column's *kind*
(``column_kind``) travels in the file's manifest, and ``decode`` turns the text back into that
kind. So a JSON column holding ``"2024-05-01"`` stays a string, and a date column gives a
``date`` (the journal's ``day``, which the old writers could not encode at all).

A value of a type this module does not know raises ``TypeError`` naming the type: an export
must fail loudly at the first new column type, not write ``str(value)`` and lose it.
"""

from __future__ import annotations

import base64
import enum
import json
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from sqlalchemy import Column, types

KINDS = ("datetime", "date", "time", "interval", "decimal", "bytes", "uuid", "json", "plain")
"""How a column's values are written: everything but ``plain`` and ``json`` is text."""

_AS_IS = (type(None), bool, int, float, str)


def _b64(value: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


_WRITERS: tuple[tuple[type | tuple[type, ...], Callable[[Any], Any]], ...] = (
    ((datetime, date, time), lambda v: v.isoformat()),  # a datetime is a date too: same text
    (timedelta, lambda v: v.total_seconds()),
    (Decimal, str),  # text: no float rounding
    ((bytes, bytearray, memoryview), _b64),
    (uuid.UUID, str),
    (enum.Enum, lambda v: encode(v.value)),
    (PurePath, lambda v: v.as_posix()),
)


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (recursively for lists and dicts); TypeError if unknown."""
    if isinstance(value, _AS_IS):
        return value
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [encode(v) for v in items]
    for kinds, write in _WRITERS:
        if isinstance(value, kinds):
            return write(value)
    raise TypeError(f"cannot write a {type(value).__name__} to JSON: teach storage/codec.py")


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text of ``value`` through ``encode`` (non-ASCII kept as is)."""
    return json.dumps(encode(value), ensure_ascii=False, indent=indent)


_COLUMN_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (types.JSON, "json"),
    (types.DateTime, "datetime"),
    (types.Date, "date"),
    (types.Time, "time"),
    (types.Interval, "interval"),
    (types.Float, "plain"),  # before Numeric: a Float is a Numeric that gives floats
    (types.Numeric, "decimal"),
    ((types.LargeBinary, types.BINARY, types.VARBINARY), "bytes"),
    (types.Uuid, "uuid"),
)


def column_kind(column: Column[Any]) -> str:
    """How ``decode`` must read back this column's values (one of ``KINDS``)."""
    sa_type = column.type
    if isinstance(sa_type, types.TypeDecorator):
        sa_type = sa_type.impl_instance
    return next((kind for cls, kind in _COLUMN_KINDS if isinstance(sa_type, cls)), "plain")


_READERS: dict[str, Callable[[Any], Any]] = {
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
    "interval": lambda v: timedelta(seconds=float(v)),
    "decimal": Decimal,
    "bytes": lambda v: base64.b64decode(v, validate=True),
    "uuid": uuid.UUID,
}


def decode(kind: str, value: Any) -> Any:
    """The database value ``value`` (as ``encode`` wrote it) stands for, read as ``kind``."""
    if value is None or kind in ("plain", "json"):
        return value
    # Exports of format 1 tagged datetimes and bytes; they still import.
    if isinstance(value, dict) and len(value) == 1 and ("$dt" in value or "$b64" in value):
        value = next(iter(value.values()))
    try:
        read = _READERS[kind]
    except KeyError:
        raise ValueError(f"unknown column kind {kind!r}") from None
    return read(value)
