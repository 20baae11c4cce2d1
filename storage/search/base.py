"""Ports of the search backends and the filter every search is scoped by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import MemoryItem


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which items a search may return: always exactly one user's."""

    user_id: int
    start: datetime | None = None
    """Inclusive lower bound on the item's time (UTC)."""
    end: datetime | None = None
    """Exclusive upper bound."""
    kinds: tuple[str, ...] = ("message", "episode", "fact", "journal", "image", "document")
    exclude_ids: frozenset[int] = field(default_factory=frozenset)
    """Item ids never to return (the question being asked right now)."""

    def where(self) -> list[Any]:
        """SQL conditions for this filter on ``memoryitem``."""
        conds: list[Any] = [
            MemoryItem.user_id == self.user_id,
            col(MemoryItem.hidden).is_(False),
            col(MemoryItem.kind).in_(self.kinds),
        ]
        if self.start is not None:
            conds.append(col(MemoryItem.ts) >= self.start)
        if self.end is not None:
            conds.append(col(MemoryItem.ts) < self.end)
        if self.exclude_ids:
            conds.append(col(MemoryItem.id).not_in(sorted(self.exclude_ids)))
        return conds


Hit = tuple[int, float]
"""(memory item id, score): higher is better."""


class FullTextIndex(Protocol):
    """Ranks one user's items by full-text relevance."""

    async def search(
        self, session: AsyncSession, terms: Sequence[str], flt: SearchFilter, limit: int
    ) -> list[Hit]:
        """Items matching any of ``terms`` (already stemmed by the index), best first."""
        ...


class VectorIndex(Protocol):
    """Ranks one user's items by cosine similarity to a query vector."""

    async def store(
        self,
        session: AsyncSession,
        user_id: int,
        ids: Sequence[int],
        vectors: npt.NDArray[np.float32],
        model: str,
    ) -> None:
        """Save vectors for items (the BLOB column is written by the caller's repo)."""
        ...

    async def search(
        self,
        session: AsyncSession,
        vector: npt.NDArray[np.float32],
        model: str,
        flt: SearchFilter,
        limit: int,
    ) -> list[Hit]:
        """The ``limit`` nearest items of ``model`` inside the filter, best first."""
        ...

    def forget(self, user_id: int) -> None:
        """Drop cached state for a user (after re-embedding or deleting items)."""
        ...
