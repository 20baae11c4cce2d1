"""What the file store's backends share: a stored file's description, its errors, its keys."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_PART = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$")
MAX_KEY = 400


@dataclass(frozen=True, slots=True)
class StoredInfo:
    """One stored file, without its bytes."""

    key: str
    """Its name within its kind (``12/345-0.jpg``)."""
    size: int
    """Bytes."""
    modified: datetime
    """When it was written or last renamed (UTC)."""


class MissingFile(FileNotFoundError):
    """No file of that kind has that key (never stored, deleted, or on another host's disk)."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"no stored {kind} file {key!r}")
        self.kind = kind
        self.key = key


class UndeclaredKind(ValueError):
    """A kind of file no registered feature declares: the store keeps nothing undeclared."""


class BadKey(ValueError):
    """A key that is not a safe relative name (``..``, an absolute path, odd characters)."""


def check_key(key: str, *, per_user: bool) -> int | None:
    """Raise BadKey unless ``key`` is ``part/part/...`` of safe names; the owner's id or None.

    A per-user kind's key starts with the owner's user id (``12/...``). Parts never start
    with a dot: the folder backend's temporary files do, and ``..`` could climb out.
    """
    if not key or len(key) > MAX_KEY:
        raise BadKey(f"a stored file's key must be 1 to {MAX_KEY} characters, not {len(key)}")
    parts = key.split("/")
    for part in parts:
        if not _PART.match(part):
            raise BadKey(f"{key!r} is not a safe file name (letters, digits, . _ - and /)")
    if not per_user:
        return None
    if len(parts) < 2 or not parts[0].isdigit():
        raise BadKey(f"{key!r} must start with its owner's user id (12/...)")
    return int(parts[0])
