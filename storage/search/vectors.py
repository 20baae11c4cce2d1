"""Vector search: pgvector when present, else an exact NumPy scan of cached vectors.

The exact index keeps, per (user, model), the item ids, times, kinds and a float32 matrix in
memory, loaded from the ``embedding`` BLOBs and topped up with rows newer than the last one
seen (one indexed ``max(id)`` query per search). Filters (time window, kinds) are applied
before ranking, so a time-scoped search can never be crowded out by items outside its window.
Edits made by another process (re-embedding) are seen after ``forget`` or a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import MemoryItem
from storage.search.base import Hit, SearchFilter, VectorIndex

KIND_CODES = {"message": 0, "episode": 1, "fact": 2, "journal": 3, "image": 4, "document": 5}


@dataclass
class _UserVectors:
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ts: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    kinds: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    hidden: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    matrix: npt.NDArray[np.float32] | None = None
    max_id: int = 0


class ExactVectorIndex:
    """Exact cosine search over in-memory copies of one user's vectors."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, str], _UserVectors] = {}
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}

    async def store(
        self,
        session: AsyncSession,
        user_id: int,
        ids: Sequence[int],
        vectors: npt.NDArray[np.float32],
        model: str,
    ) -> None:
        """Nothing beyond the BLOB column; rows already cached were re-embedded, so reload."""
        cached = self._cache.get((user_id, model))
        if cached is not None and ids and min(ids) <= cached.max_id:
            self.forget(user_id)

    def forget(self, user_id: int) -> None:
        """Drop the cached vectors of a user (every model)."""
        for key in [k for k in self._cache if k[0] == user_id]:
            del self._cache[key]

    def set_hidden(self, user_id: int, ids: Sequence[int]) -> None:
        """Mark items hidden in the cache too (their rows are updated by the repo)."""
        for (uid, _), vecs in self._cache.items():
            if uid == user_id and len(vecs.ids):
                vecs.hidden[np.isin(vecs.ids, np.asarray(ids, dtype=np.int64))] = True

    async def _refresh(self, session: AsyncSession, user_id: int, model: str) -> _UserVectors:
        key = (user_id, model)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            vecs = self._cache.setdefault(key, _UserVectors())
            newest = (
                await session.exec(
                    select(func.max(MemoryItem.id)).where(MemoryItem.user_id == user_id)
                )
            ).one()
            if newest is None or newest <= vecs.max_id:
                return vecs
            conn = await session.connection()
            stmt = (
                sa.select(
                    col(MemoryItem.id),
                    col(MemoryItem.ts),
                    col(MemoryItem.kind),
                    col(MemoryItem.hidden),
                    col(MemoryItem.embedding),
                )
                .where(
                    col(MemoryItem.user_id) == user_id,
                    col(MemoryItem.embed_model) == model,
                    col(MemoryItem.embedding).is_not(None),
                    col(MemoryItem.id) > vecs.max_id,
                )
                .order_by(col(MemoryItem.id))
            )
            rows = list((await conn.execute(stmt)).all())
            # Items embedded later (the endpoint was down) go through ``store``, which drops
            # this cache, so everything up to ``newest`` counts as seen.
            if rows:
                _append(vecs, rows)
            vecs.max_id = int(newest)
            return vecs

    async def search(
        self,
        session: AsyncSession,
        vector: npt.NDArray[np.float32],
        model: str,
        flt: SearchFilter,
        limit: int,
    ) -> list[Hit]:
        """Cosine-ranked items inside the filter."""
        vecs = await self._refresh(session, flt.user_id, model)
        if vecs.matrix is None or not len(vecs.ids):
            return []
        mask = ~vecs.hidden & np.isin(vecs.kinds, [KIND_CODES[k] for k in flt.kinds])
        if flt.start is not None:
            mask &= vecs.ts >= flt.start.timestamp()
        if flt.end is not None:
            mask &= vecs.ts < flt.end.timestamp()
        if flt.exclude_ids:
            mask &= ~np.isin(vecs.ids, np.fromiter(flt.exclude_ids, dtype=np.int64))
        return exact_top_k(vecs.matrix, vecs.ids, vector, limit, mask)


def exact_top_k(
    matrix: npt.NDArray[np.float32],
    ids: npt.NDArray[np.int64],
    vector: npt.NDArray[np.float32],
    limit: int,
    mask: npt.NDArray[np.bool_] | None = None,
) -> list[Hit]:
    """Brute-force cosine top-k (vectors are unit length, so a dot product)."""
    if matrix.shape[1] != vector.shape[0]:
        return []
    scores = matrix @ vector
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    k = min(limit, len(scores))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top])]
    return [(int(ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]


def _append(vecs: _UserVectors, rows: Sequence[tuple[object, ...]]) -> None:
    new_ids = np.fromiter((int(str(r[0])) for r in rows), dtype=np.int64, count=len(rows))
    new_ts = np.fromiter(
        (r[1].timestamp() for r in rows),  # type: ignore[attr-defined]  # datetimes
        dtype=np.float64,
        count=len(rows),
    )
    new_kinds = np.fromiter(
        (KIND_CODES.get(str(r[2]), 0) for r in rows), dtype=np.int8, count=len(rows)
    )
    new_hidden = np.fromiter((bool(r[3]) for r in rows), dtype=np.bool_, count=len(rows))
    blobs = [bytes(r[4]) for r in rows]  # type: ignore[call-overload]  # BLOB column
    dim = len(blobs[0]) // 4
    blob = b"".join(blobs)
    new_matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), dim).astype(np.float32)
    if vecs.matrix is not None and vecs.matrix.shape[1] != dim:
        return
    vecs.ids = np.concatenate([vecs.ids, new_ids])
    vecs.ts = np.concatenate([vecs.ts, new_ts])
    vecs.kinds = np.concatenate([vecs.kinds, new_kinds])
    vecs.hidden = np.concatenate([vecs.hidden, new_hidden])
    vecs.matrix = new_matrix if vecs.matrix is None else np.vstack([vecs.matrix, new_matrix])


class PgVectorIndex:
    """pgvector's ``<=>`` (cosine distance) on the ``embedding_vec`` column."""

    async def store(
        self,
        session: AsyncSession,
        user_id: int,
        ids: Sequence[int],
        vectors: npt.NDArray[np.float32],
        model: str,
    ) -> None:
        """Write the vectors into ``embedding_vec`` as well."""
        stmt = sa.text(
            "UPDATE memoryitem SET embedding_vec = CAST(:v AS vector) "
            "WHERE id = :id AND user_id = :u"
        )
        params = [
            {"v": _pg_literal(vec), "id": int(i), "u": user_id}
            for i, vec in zip(ids, vectors, strict=True)
        ]
        if params:
            conn = await session.connection()
            await conn.execute(stmt, params)

    async def search(
        self,
        session: AsyncSession,
        vector: npt.NDArray[np.float32],
        model: str,
        flt: SearchFilter,
        limit: int,
    ) -> list[Hit]:
        """Nearest items by cosine distance, computed by the server."""
        qvec = sa.text("CAST(:qv AS vector)").bindparams(qv=_pg_literal(vector))
        dist = sa.literal_column("embedding_vec").op("<=>")(qvec)
        stmt = (
            select(col(MemoryItem.id), dist.label("dist"))
            .where(
                *flt.where(),
                MemoryItem.embed_model == model,
                sa.literal_column("embedding_vec").is_not(None),
            )
            .order_by(dist)
            .limit(limit)
        )
        rows = (await session.exec(stmt)).all()
        return [(int(r[0] or 0), 1.0 - float(r[1])) for r in rows]

    def forget(self, user_id: int) -> None:
        """Nothing is cached."""


def _pg_literal(vec: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vec) + "]"


async def vector_index_for(session: AsyncSession) -> VectorIndex:
    """Use pgvector when the migration added ``embedding_vec``, else the exact NumPy index."""
    bind = session.bind
    if bind is not None and bind.dialect.name == "postgresql":
        conn = await session.connection()
        row = (
            await conn.execute(
                sa.text(
                    "SELECT 1 FROM information_schema.columns "
                    "WHERE table_name = 'memoryitem' AND column_name = 'embedding_vec'"
                )
            )
        ).first()
        if row is not None:
            return PgVectorIndex()
    return ExactVectorIndex()
