"""Tokenised text kept between processes, so a cold search does not stem every item again.

Tokenising (Snowball stems) and reading time words ("last Friday") are most of what a cold
process spends building a user's corpus. This file keeps, per item, what that produced: term
counts, length and the time span mentioned. It is a cache of a pure function of the row's
kind, speaker, text and time, and nothing more:

- an entry is used only for a row the database has just returned for this user, and only when
  the row's digest (BLAKE2b of those four fields) equals the stored one, so a rewritten text is
  tokenised again and a forgotten row is never brought back (the rows come from the database,
  never from here);
- one file per (database, user), and the file names its user and database inside: a file of
  another user, database or analyser version is ignored, never merged;
- plain NumPy arrays (``allow_pickle=False``): reading a damaged or hostile file cannot run
  code; anything unreadable is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from storage.search.analysis import analyse
from storage.search.fulltext import STOPWORDS

log = logging.getLogger(__name__)

SCHEMA = "terms-1"
"""Bump when what is cached, or how items are analysed, changes (old files are then ignored)."""


@dataclass(frozen=True, slots=True)
class Analysed:
    """What tokenising one item produced."""

    terms: dict[str, int]
    """Stem -> how often the item holds it."""
    length: int
    """How many terms the item has (repeats counted): BM25's document length."""
    span: tuple[float, float] | None
    """The time the item talks about (POSIX seconds), or None."""


def row_digest(kind: str, speaker: str, text: str, ts: float) -> int:
    """A 63-bit digest of everything tokenising an item depends on."""
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{kind}\x1f{speaker}\x1f{ts!r}\x1f{text}".encode())
    return int.from_bytes(h.digest(), "little") >> 1


class TermStore:
    """Per-user files of analysed items under one directory, for one database."""

    def __init__(self, directory: Path, database: str, fingerprint: str = "") -> None:
        self.directory = directory
        # Passwords never reach a file name or the file: only a digest of the URL.
        self.database = hashlib.blake2b(database.encode(), digest_size=8).hexdigest()
        self.version = f"{SCHEMA}:{_analyser_fingerprint()}:{fingerprint}"

    def path(self, user_id: int) -> Path:
        """The file of one user."""
        return self.directory / f"{self.database}-user-{int(user_id)}.npz"

    def load(self, user_id: int) -> dict[int, tuple[int, Analysed]]:
        """Item id -> (digest, analysed) from the user's file; empty when none fits."""
        path = self.path(user_id)
        if not path.exists():
            return {}
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(bytes(f["meta"]).decode())
                if meta != self._meta(user_id):
                    return {}
                ids, digests, lengths = f["ids"], f["digests"], f["lengths"]
                spans, offsets = f["spans"], f["offsets"]
                term_ids, counts = f["term_ids"], f["counts"]
                vocab = bytes(f["vocab"]).decode().split("\n")
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            log.info("search cache %s unreadable, rebuilding it: %s", path.name, exc)
            return {}
        out: dict[int, tuple[int, Analysed]] = {}
        starts, ends = offsets[:-1].tolist(), offsets[1:].tolist()
        tids, tfs = term_ids.tolist(), counts.tolist()
        span_list = spans.tolist()
        for n, (item_id, digest, length) in enumerate(
            zip(ids.tolist(), digests.tolist(), lengths.tolist(), strict=True)
        ):
            a, b = starts[n], ends[n]
            lo, hi = span_list[n]
            out[item_id] = (
                digest,
                Analysed(
                    {vocab[t]: c for t, c in zip(tids[a:b], tfs[a:b], strict=True)},
                    length,
                    None if math.isnan(lo) else (lo, hi),
                ),
            )
        return out

    def save(self, user_id: int, items: list[tuple[int, int, Analysed]]) -> None:
        """Replace the user's file with ``(item id, digest, analysed)`` (atomically)."""
        vocab: dict[str, int] = {}
        offsets = [0]
        term_ids: list[int] = []
        counts: list[int] = []
        for _, _, an in items:
            for term, c in an.terms.items():
                term_ids.append(vocab.setdefault(term, len(vocab)))
                counts.append(c)
            offsets.append(len(term_ids))
        spans = [an.span or (np.nan, np.nan) for _, _, an in items]
        arrays: dict[str, npt.NDArray[np.generic]] = {
            "meta": _bytes(json.dumps(self._meta(user_id)).encode()),
            "ids": np.array([i for i, _, _ in items], dtype=np.int64),
            "digests": np.array([d for _, d, _ in items], dtype=np.int64),
            "lengths": np.array([an.length for _, _, an in items], dtype=np.int32),
            "spans": np.array(spans, dtype=np.float64).reshape(len(items), 2),
            "offsets": np.array(offsets, dtype=np.int64),
            "term_ids": np.array(term_ids, dtype=np.int32),
            "counts": np.array(counts, dtype=np.int32),
            "vocab": _bytes("\n".join(vocab).encode()),
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(user_id)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            with tmp.open("wb") as fh:
                np.savez(fh, **arrays)  # type: ignore[arg-type]
            os.replace(tmp, path)  # readers see the old file or the new one, never half
        except OSError as exc:
            # A cache that cannot be written costs speed, not answers.
            log.warning("could not write search cache %s: %s", path, exc)
            tmp.unlink(missing_ok=True)

    def drop(self, user_id: int) -> None:
        """Delete the user's file (their items were deleted)."""
        self.path(user_id).unlink(missing_ok=True)

    def _meta(self, user_id: int) -> dict[str, object]:
        return {"version": self.version, "database": self.database, "user": int(user_id)}


def _analyser_fingerprint() -> str:
    """Changes when the stop words or the stemming change, so old files stop matching."""
    probe = analyse("The adopted children's running adoption agencies, généralement")
    h = hashlib.blake2b(digest_size=8)
    h.update("\n".join([*sorted(STOPWORDS), *probe]).encode())
    return h.hexdigest()


def _bytes(data: bytes) -> npt.NDArray[np.uint8]:
    return np.frombuffer(data, dtype=np.uint8)
