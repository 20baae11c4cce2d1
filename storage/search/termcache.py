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
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from storage.files.private import open_private, private_dir
from storage.search.analysis import analyse
from storage.search.fulltext import STOPWORDS

log = logging.getLogger(__name__)

SCHEMA = "terms-2"
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
    asks: bool = False
    """The item asks a question (see ``analysis.asks``)."""
    self_words: int = 0
    """How often the item says "I", "my", "we"... (see ``analysis.self_words``)."""


@dataclass(frozen=True, slots=True)
class Saved:
    """The analyses of many items as flat arrays (what a user's file holds, item by item).

    Item ``k``'s terms are ``vocab[term_ids[offsets[k]:offsets[k + 1]]]``, each held
    ``counts[...]`` times.
    """

    ids: npt.NDArray[np.int64]
    """Item ids."""
    digests: npt.NDArray[np.int64]
    """``row_digest`` of each item when it was analysed."""
    lengths: npt.NDArray[np.int32]
    """Each item's length in terms."""
    spans: npt.NDArray[np.float64]
    """Shape (n, 2): the time each item talks about (NaN: none)."""
    offsets: npt.NDArray[np.int64]
    """Shape (n + 1,): where each item's terms start in ``term_ids`` and ``counts``."""
    term_ids: npt.NDArray[np.int32]
    """Indexes into ``vocab``."""
    counts: npt.NDArray[np.int32]
    """How often the item holds the term."""
    vocab: list[str]
    """The terms."""
    asks: npt.NDArray[np.bool_]
    """Whether each item asks a question."""
    self_words: npt.NDArray[np.uint8]
    """How often each item speaks in the first person."""

    def valid(self) -> bool:
        """Whether the arrays fit together (a damaged file's may not)."""
        n = len(self.ids)
        return bool(
            self.ids.shape == self.digests.shape == self.lengths.shape == (n,)
            and self.asks.shape == self.self_words.shape == (n,)
            and self.spans.shape == (n, 2)
            and self.offsets.shape == (n + 1,)
            and self.offsets[0] == 0
            and self.offsets[-1] == len(self.term_ids) == len(self.counts)
            and (np.diff(self.offsets) >= 0).all()
            and (len(self.term_ids) == 0 or self.term_ids.min() >= 0)
            and (len(self.term_ids) == 0 or self.term_ids.max() < len(self.vocab))
            and len(np.unique(self.ids)) == n
        )


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
        """The file of one user (under their id, so delete-my-data takes it with their files)."""
        return self.directory / str(int(user_id)) / f"{self.database}.npz"

    def load(self, user_id: int) -> Saved | None:
        """The user's saved analyses; None when there is no file or it does not fit."""
        path = self.path(user_id)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(bytes(f["meta"]).decode())
                if meta != self._meta(user_id):
                    return None
                saved = Saved(
                    ids=f["ids"].astype(np.int64),
                    digests=f["digests"].astype(np.int64),
                    lengths=f["lengths"].astype(np.int32),
                    spans=f["spans"].astype(np.float64),
                    offsets=f["offsets"].astype(np.int64),
                    term_ids=f["term_ids"].astype(np.int32),
                    counts=f["counts"].astype(np.int32),
                    vocab=bytes(f["vocab"]).decode().split("\n"),
                    asks=f["asks"].astype(np.bool_),
                    self_words=f["self_words"].astype(np.uint8),
                )
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            log.info("search cache %s unreadable, rebuilding it: %s", path.name, exc)
            return None
        if not saved.valid():
            log.info("search cache %s does not fit together, rebuilding it", path.name)
            return None
        return saved

    def save(self, user_id: int, saved: Saved) -> None:
        """Replace the user's file with ``saved`` (atomically)."""
        arrays: dict[str, npt.NDArray[np.generic]] = {
            "meta": _bytes(json.dumps(self._meta(user_id)).encode()),
            "ids": saved.ids.astype(np.int64),
            "digests": saved.digests.astype(np.int64),
            "lengths": saved.lengths.astype(np.int32),
            "spans": saved.spans.astype(np.float64).reshape(len(saved.ids), 2),
            "offsets": saved.offsets.astype(np.int64),
            "term_ids": saved.term_ids.astype(np.int32),
            "counts": saved.counts.astype(np.int32),
            "vocab": _bytes("\n".join(saved.vocab).encode()),
            "asks": saved.asks.astype(np.bool_),
            "self_words": saved.self_words.astype(np.uint8),
        }
        path = self.path(user_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            private_dir(path.parent)  # 0700: the words of someone's messages
            with os.fdopen(open_private(tmp), "wb") as fh:
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
