"""Numbers and dates from a URL or a form, parsed into range-checked types (issue 28).

A number in a path or a query is checked against its range before a route sees it, so an id
beyond what the id columns hold (``INTEGER``: 2^31-1 on PostgreSQL) or a date beyond what
arithmetic can reach is a 422 (a 404 on a page address), never a 500 from deep inside a
query. Every integer and date parameter of every route carries one of these
(``tests/test_request_layer.py`` checks it).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from bot.messages import clean_texts
from storage.models import MAX_ROW_ID

RowId = Annotated[int, Ge(1), Le(MAX_ROW_ID)]
"""The id of a stored row (a fact, a message, a reminder...): 1 to 2^31-1 (``MAX_ROW_ID``;
PostgreSQL's driver failed on a larger one, a 500, where SQLite found nothing)."""

FIRST_DAY = date(1900, 1, 1)
"""The earliest day an address or a tool may name."""
LAST_DAY = date(2999, 12, 31)
"""The last day an address or a tool may name."""

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)


def _written_day(value: Any) -> Any:
    """A day as written in an address or a tool's arguments: ``YYYY-MM-DD`` and nothing else.

    Left to itself pydantic reads a number as seconds since 1970 (``?day=0`` was 1 January
    1970) and ``2024-03-02T00:00`` as a day too.
    """
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not _ISO_DAY.fullmatch(value):
        raise ValueError("a day is written YYYY-MM-DD")
    return value


Day = Annotated[date, BeforeValidator(_written_day), Ge(FIRST_DAY), Le(LAST_DAY)]
"""A calendar day a person could mean (``YYYY-MM-DD``, 1900 to 2999); far enough from the
ends that date arithmetic holds."""

SpanDays = Annotated[int, Ge(1), Le(3660)]
"""A span of days to show (a journal chart): a day to ten years."""


class BodyIn(BaseModel):
    """A JSON body the API takes: a field it does not know is refused (422), not ignored.

    A misspelt field (``tz`` for ``timezone``) would otherwise be dropped and the request
    answered 200 having changed nothing, which a caller cannot tell from success. Its texts
    are made storable before they are checked (``clean_text``), as a chat message's are: a NUL
    is dropped (PostgreSQL's text columns refuse it: a 500) and half an emoji becomes U+FFFD.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable_texts(cls, data: Any) -> Any:
        return clean_texts(data)


def row_id(text: str | None) -> int | None:
    """A row id typed in a form (``"42"``), or None when it is not one."""
    # more digits than any id could have are refused unread: int() of 5000 digits raises
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    value = int(text)
    return value if 1 <= value <= MAX_ROW_ID else None
