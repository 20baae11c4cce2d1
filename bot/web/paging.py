"""Cursor pagination for every list of the REST API (issue 31).

A list answers ``{"items": [...], "next": "<cursor>" | null}``; ``?limit=`` says how many
items a page holds (above the maximum is refused with 422, never silently cut) and
``?cursor=`` is the ``next`` of the page before. A cursor is opaque: the position after the
last item given (its sort key, so items added or removed between two pages are neither
repeated nor skipped), the list and the user it was made for, and when; sealed with a MAC
under the server's key. A cursor that was changed, made for another list or user, or is
older than ``CURSOR_TTL`` is a 400 that says to start again from the first page.

A user's lists are read whole and cut here (they are the user's own rows, a few hundred at
most for facts); the sort key is what the list was already ordered by, with the id last so
that no two items share a position.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import HTTPException, Query
from pydantic import BaseModel, Field

T = TypeVar("T")
Key = tuple[int | float | str, ...]
"""An item's position in its list (its sort key, the id last)."""

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
"""The most items one page holds."""
CURSOR_TTL = 24 * 3600
"""Seconds a cursor stays good (walking a list takes minutes, not days)."""

Limit = Annotated[
    int,
    Query(ge=1, le=MAX_LIMIT, description=f"Items per page, 1 to {MAX_LIMIT} (default 50)."),
]
Cursor = Annotated[
    str | None,
    Query(
        max_length=1000,
        description="The `next` of the previous page; leave it out for the first page.",
    ),
]


class Page(BaseModel, Generic[T]):
    """One page of a list."""

    items: list[T]
    next: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


def stamp(at: datetime) -> int:
    """A datetime as a sortable key part (microseconds since the epoch)."""
    return int(at.timestamp() * 1_000_000)


Seal = Callable[[str], Awaitable[str]]
"""A MAC of a text under the server's key (``WebAuth.seal``)."""


class BadCursor(HTTPException):
    """A cursor lifebot did not make for this list (a 400 in the shared error shape)."""

    def __init__(self, why: str) -> None:
        super().__init__(400, f"{why} Start again from the first page (no cursor).")


@dataclass(frozen=True, slots=True)
class Position:
    """What a cursor says: where the last page ended."""

    after: Key | None
    """The last item's key (keyset lists)."""
    offset: int
    """Items already given (ranked lists: search)."""


async def make_cursor(
    seal: Seal, scope: str, user_id: int, pos: Position, *, issued: float | None = None
) -> str:
    """A sealed cursor for ``pos`` in list ``scope`` of ``user_id`` (made now, or ``issued``)."""
    made = int(time.time() if issued is None else issued)
    body = json.dumps(
        {"s": scope, "u": user_id, "a": pos.after, "o": pos.offset, "t": made},
        separators=(",", ":"),
    )
    text = base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
    return f"{text}.{await seal(text)}"


async def read_cursor(seal: Seal, scope: str, user_id: int, cursor: str) -> Position:
    """Where ``cursor`` says to go on; BadCursor when it cannot be trusted here."""
    text, _, mac = cursor.partition(".")
    if not text or not mac or not hmac.compare_digest(mac, await seal(text)):
        raise BadCursor("This cursor is not one lifebot made, or it was changed.")
    try:
        body: dict[str, Any] = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error) as exc:  # sealed by us, so only a key change gets here
        raise BadCursor("This cursor cannot be read.") from exc
    if body.get("s") != scope or body.get("u") != user_id:
        raise BadCursor("This cursor belongs to another list.")
    if time.time() - float(body.get("t", 0)) > CURSOR_TTL:
        raise BadCursor("This cursor is more than a day old.")
    after = body.get("a")
    return Position(tuple(after) if isinstance(after, list) else None, int(body.get("o", 0)))


async def keyset_page(
    items: Sequence[T],
    key: Callable[[T], Key],
    *,
    limit: int,
    cursor: str | None,
    seal: Seal,
    scope: str,
    user_id: int,
) -> tuple[list[T], str | None]:
    """The page of ``items`` (in ``key`` order) after ``cursor``, and the next cursor."""
    ordered = sorted(items, key=key)
    if cursor is not None:
        pos = await read_cursor(seal, scope, user_id, cursor)
        if pos.after is None:
            raise BadCursor("This cursor belongs to another list.")
        after = pos.after
        try:
            ordered = [item for item in ordered if key(item) > after]
        except TypeError as exc:  # a key of another shape: made for another list
            raise BadCursor("This cursor belongs to another list.") from exc
    page = ordered[:limit]
    more = len(ordered) > limit
    nxt = await make_cursor(seal, scope, user_id, Position(key(page[-1]), 0)) if more else None
    return page, nxt


async def offset_cursor(seal: Seal, scope: str, user_id: int, cursor: str | None) -> int:
    """How many items of a ranked list the pages before gave (0 without a cursor)."""
    if cursor is None:
        return 0
    pos = await read_cursor(seal, scope, user_id, cursor)
    if pos.after is not None or pos.offset < 1:
        raise BadCursor("This cursor belongs to another list.")
    return pos.offset


async def next_offset(seal: Seal, scope: str, user_id: int, offset: int) -> str:
    """The cursor of a ranked list's next page, ``offset`` items in."""
    return await make_cursor(seal, scope, user_id, Position(None, offset))
