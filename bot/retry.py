"""The one shared retry helper: retry only what is transient, honour Retry-After."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

Classifier = Callable[[BaseException], float | None]
"""Returns None for a permanent error, or a delay hint in seconds (0 = use backoff)."""


async def retry_transient(
    fn: Callable[[], Awaitable[T]],
    *,
    classify: Classifier,
    attempts: int,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    what: str = "call",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Call ``fn`` up to ``attempts`` + 1 times while ``classify`` says the error is transient.

    The delay is the peer's Retry-After hint when given, else exponential backoff with jitter.
    The last error is re-raised unchanged so the caller can translate it.
    """
    attempt = 0
    while True:
        try:
            return await fn()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            hint = classify(exc)
            if hint is None or attempt >= attempts:
                raise
            backoff = min(max_delay, base_delay * (2**attempt)) * (0.8 + 0.4 * random.random())  # noqa: S311  (jitter, not crypto)
            delay = min(max_delay, hint) if hint > 0 else backoff
            log.warning(
                "%s failed (%s); retry %d/%d in %.1fs",
                what,
                type(exc).__name__,
                attempt + 1,
                attempts,
                delay,
            )
            attempt += 1
            await sleep(delay)
