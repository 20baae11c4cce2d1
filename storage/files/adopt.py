"""Files older lifebots kept in their own folders, moved into the file store at start-up.

Before the store, photos lived in ``<data dir>/images``, documents in ``<data dir>/documents``
and Omi's inbox in ``<data dir>/spool/omi``, each under the same relative names the store now
uses as keys. ``adopt_legacy`` moves every such file into the store (into the database on
PostgreSQL: a second host then sees the pictures the first one kept) and removes the old copy
and emptied folders. It is idempotent: a file already in the store with the same size is
simply removed from the old folder; one that differs is left where it is and logged, never
overwritten. The search cache's old folder is a cache of the database: it is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from storage.files.base import BadKey, check_key
from storage.files.store import FileStore

log = logging.getLogger(__name__)

LEGACY = (("images", "photos"), ("documents", "documents"), ("spool/omi", "omi-audio"))
"""(old folder under the data dir, the kind its files are now)."""
LEGACY_CACHES = ("search-cache",)
"""Old folders of derived files: rebuilt on demand, so removed rather than moved."""


@dataclass(frozen=True, slots=True)
class Adopted:
    """What one adoption moved."""

    moved: dict[str, int]
    """Files moved into the store, by kind."""
    left: int
    """Files left in an old folder (a different file with the same key is in the store)."""


async def adopt_legacy(store: FileStore, data_dir: Path) -> Adopted:
    """Move files of the old folders into the store (see the module docstring)."""
    moved: dict[str, int] = {}
    left = 0
    for folder, kind in LEGACY:
        root = data_dir / folder
        try:
            declared = store.kind(kind)
        except ValueError:
            continue  # the feature is not registered here
        paths = await asyncio.to_thread(_old_files, root)
        for path in paths:
            if path.name.endswith(".part"):
                # A chunk Omi posted that was never answered: Omi sends it again.
                await asyncio.to_thread(path.unlink, True)
                continue
            key = path.relative_to(root).as_posix()
            try:
                check_key(key, per_user=declared.per_user)
            except BadKey as exc:
                log.warning("not moving %s into the file store: %s", path, exc)
                left += 1
                continue
            if await _adopt_one(store, kind, key, path):
                moved[kind] = moved.get(kind, 0) + 1
            else:
                left += 1
        await asyncio.to_thread(_prune, root, data_dir)
    for cache in LEGACY_CACHES:
        await asyncio.to_thread(shutil.rmtree, data_dir / cache, True)
    if moved:
        log.info("moved %s file(s) of older folders into the file store (%s)", moved, store.where)
    return Adopted(moved, left)


async def _adopt_one(store: FileStore, kind: str, key: str, path: Path) -> bool:
    try:
        size = (await asyncio.to_thread(path.stat)).st_size
    except FileNotFoundError:
        return False  # another process moved it meanwhile
    there = await store.stat(kind, key)
    if there is not None and there.size != size:
        log.warning("%s differs from the stored %s file %s: left where it is", path, kind, key)
        return False
    if there is None:
        try:
            await store.put_file(kind, key, path)
        except FileNotFoundError:
            return False
    await asyncio.to_thread(path.unlink, True)
    return True


def _old_files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    out: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        out.extend(Path(dirpath) / n for n in names)
    return sorted(out)


def _prune(root: Path, data_dir: Path) -> None:
    """Remove emptied folders under ``root`` and ``root`` itself (never the data dir)."""
    if not root.is_dir():
        return
    for dirpath, _dirs, _names in sorted(os.walk(root), key=lambda w: -len(w[0])):
        folder = Path(dirpath)
        if folder != data_dir:
            try:
                folder.rmdir()
            except OSError:
                continue  # not empty
