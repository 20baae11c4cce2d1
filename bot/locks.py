"""One lock per key: turns of one conversation (or updates of one chat) run one at a time.

``ConversationLock`` is the port dispatch and the channels depend on. ``KeyedLocks`` is the
in-process implementation: an ``asyncio.Lock`` per key, created on first use and dropped as
soon as nobody holds or waits for it, so the table never grows with the number of chats. A
cross-process implementation (for example a PostgreSQL advisory lock per key) can implement
the same Protocol without any caller changing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class ConversationLock(Protocol[K_contra]):
    """Serialises work per key; later holders of the same key queue behind, in order."""

    def hold(self, key: K_contra) -> AbstractAsyncContextManager[None]:
        """Hold the key's lock for the body of an ``async with``."""
        ...


class KeyedLocks(Generic[K]):
    """In-process ``ConversationLock``: one reference-counted ``asyncio.Lock`` per key."""

    def __init__(self) -> None:
        self._locks: dict[K, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        """Hold ``key``'s lock; waiters are served first come, first served (asyncio.Lock)."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """How many keys are held or waited for right now."""
        return len(self._locks)
