"""Helpers for tests of the Telegram channel (its fixtures live in tests/conftest.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

CHAT = 555
"""In a private chat Telegram's chat id is the user's id."""

Starter = Callable[..., Any]
"""Starts lifebot with the Telegram channel (the ``telegram`` fixture)."""


async def eventually(check: Callable[[], Any], within: float = 10.0) -> None:
    """Wait until the async ``check()`` returns true (for effects outside the fake server)."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110  (the effect is in the database: poll it)
            await asyncio.sleep(0.02)
