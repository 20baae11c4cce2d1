"""Reading Wyoming events with bounded sizes.

An event is a JSON header line, then ``data_length`` bytes of more JSON data and
``payload_length`` bytes of payload. The ``wyoming`` package reads whatever lengths the header
declares; a client that declares 2 GB would have it buffered. Here every declared length is
checked against a cap before a byte of it is read, and the header line itself is bounded.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from wyoming.event import Event

MAX_HEADER_BYTES = 64 * 1024
"""Longest header line (asyncio's own line limit, so it is also where reading stops)."""
MAX_DATA_BYTES = 1024 * 1024
"""Most ``data_length`` accepted: Home Assistant's texts and contexts are a few kilobytes."""
MAX_PAYLOAD_BYTES = 1024 * 1024
"""Most ``payload_length`` accepted: 32 s of 16 kHz 16-bit audio in one chunk; Home
Assistant sends chunks of a few milliseconds."""


class EventTooLarge(Exception):
    """A declared length is over its cap; the message says which, in plain words."""


class BadEvent(Exception):
    """Not a Wyoming event (bad JSON, no type, negative lengths)."""


def _length(header: dict[str, Any], key: str, cap: int) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadEvent(f"{key} must be a whole number of bytes")
    if value > cap:
        raise EventTooLarge(f"{key} {value} is over the limit of {cap} bytes")
    return value


async def read_event(
    reader: asyncio.StreamReader,
    *,
    max_data: int = MAX_DATA_BYTES,
    max_payload: int = MAX_PAYLOAD_BYTES,
) -> Event | None:
    """The next event, or None at the end of the stream.

    Raises EventTooLarge before reading an over-long part and BadEvent for malformed input.
    """
    try:
        line = await reader.readline()
    except (ValueError, asyncio.LimitOverrunError):
        raise EventTooLarge(
            f"a header line is over the limit of {MAX_HEADER_BYTES} bytes"
        ) from None
    if not line:
        return None
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadEvent("a header line is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise BadEvent("an event needs a type")
    data_length = _length(header, "data_length", max_data)
    payload_length = _length(header, "payload_length", max_payload)
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadEvent("an event's data must be an object")
    try:
        if data_length:
            extra = json.loads(await reader.readexactly(data_length))
            if not isinstance(extra, dict):
                raise BadEvent("an event's data must be an object")
            data.update(extra)
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None  # the client left mid-event
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadEvent("an event's data is not JSON") from None
    return Event(type=header["type"], data=data, payload=payload)
