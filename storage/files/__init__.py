"""The one file store (issue 28): every file a feature keeps, by declared kind, on one backend.

See ``store.py``; ``private.py`` makes the 0700 folders and 0600 files of everything else
lifebot writes (logs, backups, working folders).
"""

from storage.files.base import BadKey, MissingFile, StoredInfo, UndeclaredKind
from storage.files.store import FileStore

__all__ = ["BadKey", "FileStore", "MissingFile", "StoredInfo", "UndeclaredKind"]
