"""The file store's folder backend: ``<root>/<kind>/<key>``, 0700 folders and 0600 files.

Writes go to a hidden temporary name in the same folder, are synced, then renamed into
place: a reader sees the old file or the new one, a crash leaves at most a temporary file
(never listed, swept by the next write of its folder's files). The methods block; the store
calls them from worker threads.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from storage.files.base import MissingFile, StoredInfo
from storage.files.private import FILE_MODE, private_dir, sync_dir

_COPY_BYTES = 1024 * 1024


def local_folder(data_dir: Path, kind: str) -> Path:
    """The folder of one kind's files in a data folder (made when first written)."""
    return data_dir / "files" / kind


class LocalBackend:
    """Files of every kind under one folder (the data folder's ``files``)."""

    name = "folder"

    def __init__(self, root: Path) -> None:
        self.root = root
        """``<root>/<kind>/<key>``."""

    def path(self, kind: str, key: str) -> Path:
        """Where a file is (or would be) kept; the key was checked by the store."""
        return self.root / kind / key

    def put(self, kind: str, key: str, source: bytes | Path) -> StoredInfo:
        """Store ``source`` (bytes, or a file copied in) under ``key``, replacing any file."""
        target = self.path(kind, key)
        private_dir(target.parent)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "wb", closefd=False) as out:
                if isinstance(source, Path):
                    with source.open("rb") as src:
                        shutil.copyfileobj(src, out, _COPY_BYTES)
                else:
                    out.write(source)
                out.flush()
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, target)
        sync_dir(target.parent)
        return self._info(key, target)

    def get(self, kind: str, key: str) -> bytes:
        """The file's bytes; MissingFile when there is none."""
        try:
            return self.path(kind, key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise MissingFile(kind, key) from exc

    def copy_to(self, kind: str, key: str, target: Path) -> int:
        """Copy the file to ``target`` (created 0600); its size. MissingFile when there is none."""
        source = self.path(kind, key)
        if not source.is_file():
            raise MissingFile(kind, key)
        private_dir(target.parent)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            os.fchmod(out.fileno(), FILE_MODE)
            shutil.copyfileobj(src, out, _COPY_BYTES)
            return out.tell()

    def stat(self, kind: str, key: str) -> StoredInfo | None:
        """Size and time of one file, or None."""
        path = self.path(kind, key)
        return self._info(key, path) if path.is_file() else None

    def listing(self, kind: str, prefix: str = "") -> list[StoredInfo]:
        """Every file of ``kind`` whose key starts with ``prefix``, sorted by key."""
        folder = self.root / kind
        # Only walk the part of the tree the prefix can be in.
        start = folder / prefix.rsplit("/", 1)[0] if "/" in prefix else folder
        out: list[StoredInfo] = []
        for path in _files(start):
            key = path.relative_to(folder).as_posix()
            if key.startswith(prefix):
                try:
                    out.append(self._info(key, path))
                except FileNotFoundError:
                    continue  # deleted while we looked
        out.sort(key=lambda info: info.key)
        return out

    def delete(self, kind: str, key: str) -> bool:
        """Remove one file; False when there was none."""
        try:
            self.path(kind, key).unlink()
        except FileNotFoundError:
            return False
        return True

    def delete_owner(self, kind: str, owner: int) -> int:
        """Remove every file of one user (a per-user kind's ``<owner>/`` folder); how many."""
        folder = self.root / kind / str(owner)
        count = sum(1 for _ in _files(folder))
        shutil.rmtree(folder, ignore_errors=True)
        return count

    def rename(self, kind: str, old: str, new: str) -> StoredInfo:
        """Give a file another key at once (replacing any file there); MissingFile if none."""
        source, target = self.path(kind, old), self.path(kind, new)
        private_dir(target.parent)
        try:
            os.replace(source, target)
        except FileNotFoundError as exc:
            raise MissingFile(kind, old) from exc
        os.utime(target)  # the time of the last change of state (Omi's tombstones age by it)
        sync_dir(target.parent)
        return self._info(new, target)

    @staticmethod
    def _info(key: str, path: Path) -> StoredInfo:
        st = path.stat()
        return StoredInfo(key, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))


def _files(folder: Path) -> Iterator[Path]:
    """Every stored file under ``folder`` (temporary files of unfinished writes left out)."""
    if not folder.is_dir():
        return
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            if not name.startswith("."):
                yield Path(dirpath) / name
