"""Reading a folder of dated journal files (Markdown or plain text).

The date comes from YAML-style front matter (``date: 2024-05-08``) or from the file name
(``2024-05-08.md``, ``journal 2024_05_08.txt``, ``20240508-notes.md``). A file without a date,
empty, or not UTF-8 is reported by name; the others are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from bot.errors import BotError

SUFFIXES = (".md", ".markdown", ".txt", ".text")
_NAME_DATE = re.compile(r"(?<!\d)(\d{4})[-_.]?(\d{2})[-_.]?(\d{2})(?!\d)")
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
_FRONT_DATE = re.compile(r"^date\s*:\s*['\"]?(\d{4}-\d{2}-\d{2})", re.MULTILINE | re.IGNORECASE)


class JournalDirError(BotError):
    """The folder cannot be imported at all (missing, not a folder)."""


@dataclass(frozen=True, slots=True)
class JournalFile:
    """One readable, dated entry."""

    ref: str
    """``file:<path relative to the folder>``: the same file always maps to the same entry."""
    day: date
    text: str


def _date_of(name: str, front: str | None) -> date | None:
    for raw in ([_FRONT_DATE.search(front)] if front else []) + [_NAME_DATE.search(name)]:
        if raw is None:
            continue
        parts = re.findall(r"\d+", raw.group(0) if raw.re is _NAME_DATE else raw.group(1))
        if len(parts) == 1:  # 20240508
            parts = [parts[0][:4], parts[0][4:6], parts[0][6:]]
        try:
            return date(int(parts[0]), int(parts[1]), int(parts[2]))
        except ValueError:
            continue
    return None


def journal_files(folder: Path) -> list[Path]:
    """The candidate files under ``folder`` (recursively), in a stable order."""
    if not folder.exists():
        raise JournalDirError(f"{folder} does not exist")
    if not folder.is_dir():
        raise JournalDirError(f"{folder} is not a folder; give the folder of journal files")
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)


def read_journal(folder: Path) -> Iterator[tuple[str, JournalFile | str]]:
    """(relative name, entry or the reason it was skipped) for every candidate file."""
    for path in journal_files(folder):
        rel = path.relative_to(folder).as_posix()
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            yield rel, "not UTF-8 text"
            continue
        except OSError as exc:
            yield rel, f"cannot be read ({exc.strerror or exc})"
            continue
        front = _FRONT.match(raw)
        body = raw[front.end() :] if front else raw
        day = _date_of(path.name, front.group(1) if front else None)
        if day is None:
            yield rel, "no date in the file name or front matter (e.g. 2024-05-08.md)"
            continue
        if not body.strip():
            yield rel, "empty"
            continue
        yield rel, JournalFile(f"file:{rel}", day, body.strip())
