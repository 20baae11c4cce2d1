"""``lifebot import``: JSON Lines and Telegram Desktop exports into a user's memory.

Idempotent, and nothing distinct is ever merged: every imported message gets the dedupe key
``import:<user>:<source>:<hash>``, the hash of everything the record says (conversation, id,
time, speaker, text). Re-importing a file, or a later export that repeats earlier messages,
adds nothing twice; two files that reuse a conversation and message id for different messages
(ids restart per export) both keep theirs. Messages imported before this key (``import:<user>:
jsonl:<conversation>:<id>`` and ``...:tg:<chat>:<id>``) count as already there when that key
holds the same text.

Every line is accounted for: ``read`` (kept as it was) + ``cleaned`` (kept, after removing what
no database stores: NULs, lone surrogates; or an id, name or conversation cut to 200
characters) + ``refused`` (not JSON, invalid UTF-8, no text, a time out of range) = ``lines``
(non-blank lines; in a Telegram export, messages, where stickers, photos without a caption and
service messages are ``skipped``). Each cleaned or refused line is reported by file and line
number. A UTF-8 BOM is ignored. Imported text is untrusted data: it is stored and indexed,
never read as instructions.

JSON Lines, one message per line::

    {"id": "...", "ts": "2023-05-08T13:56:00+00:00", "speaker": "...", "text": "...",
     "conversation": "..."}   # conversation optional; a time without offset is the user's zone

Telegram Desktop: ``result.json`` of one chat, or of a full export (``chats.list``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.errors import ImportFileError
from bot.messages import Address, clean_text
from storage.db import Database
from storage.repos.episodes import CursorRepo
from storage.repos.messages import ConversationRepo, MessageRepo

Progress = Callable[[int], None]


@dataclass(slots=True)
class ImportRecord:
    """One message ready to store."""

    id: str
    ts: datetime
    speaker: str
    text: str
    conversation: str
    source: str
    """``jsonl`` or ``telegram``."""
    link: str | None = None
    cleaned: list[str] = field(default_factory=list)
    """What had to change to store it ("a NUL removed from 'text'"); empty: kept as it was."""

    @property
    def key(self) -> str:
        """What makes this record distinct within its user's imports: all it says, hashed."""
        said = [self.source, self.conversation, self.id, _utc(self.ts), self.speaker, self.text]
        digest = hashlib.sha256(json.dumps(said, ensure_ascii=False).encode()).hexdigest()
        return f"{self.source}:{digest[:32]}"

    @property
    def legacy_key(self) -> str:
        """The key imports used before (conversation and id only): such rows are already here."""
        return (
            self.id if self.source == "telegram" else f"{self.source}:{self.conversation}:{self.id}"
        )


class Skipped(str):
    """Not a message someone said (a sticker, a photo without caption, a service message)."""

    __slots__ = ()


@dataclass(slots=True)
class ImportReport:
    """The outcome of one import: ``read + cleaned + refused + skipped == lines``."""

    file: str = ""
    """The imported file's name, for the report's lines."""
    lines: int = 0
    """Records in the file: non-blank lines, or a Telegram export's messages."""
    read: int = 0
    """Kept as they were."""
    cleaned: list[tuple[str, str]] = field(default_factory=list)
    """(where, what changed) of records kept after cleaning."""
    bad: list[tuple[str, str]] = field(default_factory=list)
    """(where, why) of refused records: "line 12", "message 40 of chat 'Ana'"."""
    skipped: int = 0
    """Telegram messages that are not text (stickers, service messages)."""
    added: int = 0
    """Kept records that were new."""
    duplicates: int = 0
    """Kept records already imported (this run or an earlier one)."""
    conversations: set[int] = field(default_factory=set)
    message_ids: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Records seen (the same as ``lines``)."""
        return self.lines

    def problems(self) -> list[str]:
        """One line per cleaned or refused record, by file and line, in file order."""
        out = [(w, f"{self.file}, {w}: refused: {why}") for w, why in self.bad]
        out += [(w, f"{self.file}, {w}: kept after cleaning: {what}") for w, what in self.cleaned]
        return [text for _, text in sorted(out, key=lambda item: _position(item[0]))]


def _position(where: str) -> tuple[str, int]:
    """Sort key of "line 12" / "message 40 of chat 'Ana'": by chat, then number."""
    head, _, rest = where.partition(" of ")
    number = head.rsplit(" ", 1)[-1]
    return rest, int(number) if number.isdigit() else 0


def _utc(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat()


def _clean(value: str, name: str, notes: list[str], limit: int | None = None) -> str:
    """``value`` as a database stores it; what changed is added to ``notes``."""
    out = clean_text(value)
    if out != value:
        if "\x00" in value:
            notes.append(f"NUL characters removed from '{name}'")
        if out != value.replace("\x00", ""):
            notes.append(f"a broken character (lone surrogate) replaced in '{name}'")
    if limit is not None and len(out) > limit:
        out = out[:limit]
        notes.append(f"'{name}' cut to {limit} characters")
    return out


def _parse_ts(value: Any, tz: tzinfo) -> datetime:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"'ts' is not a usable Unix time: {value!r}") from exc
    if not isinstance(value, str) or not value:
        raise ValueError("'ts' is missing")
    try:
        ts = datetime.fromisoformat(value)  # 3.11 reads a trailing "Z"
    except ValueError as exc:
        raise ValueError(f"'ts' is not an ISO 8601 time: {value[:40]!r}") from exc
    ts = ts.replace(tzinfo=tz) if ts.tzinfo is None else ts
    try:
        ts.astimezone(UTC)  # stored in UTC: a time at the edge of the calendar overflows
    except (OverflowError, ValueError) as exc:
        raise ValueError(f"'ts' is out of range: {value[:40]!r}") from exc
    return ts


_OTHER_NAMES = {
    "id": ("message_id", "msg_id", "uuid", "dia_id"),
    "ts": ("time", "timestamp", "date", "datetime", "created_at", "sent_at"),
    "text": ("message", "content", "body", "msg"),
}
"""Field names other tools use for ours: named in the refusal, never guessed at (a "date"
column of another export may mean something else)."""


def _missing(field: str, data: dict[str, Any], what: str = "is missing") -> ValueError:
    """The refusal for a missing field, naming a look-alike field the line does have."""
    alike = [name for name in _OTHER_NAMES[field] if name in data]
    hint = f" (this line has {alike[0]!r}: rename it to {field!r})" if alike else ""
    return ValueError(f"{field!r} {what}{hint}")


def _jsonl_record(line: str, tz: ZoneInfo) -> ImportRecord:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")  # noqa: TRY004  (reported as a bad line)
    rid = data.get("id")
    if rid is None or str(rid).strip() == "":
        raise _missing("id", data)
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise _missing("text", data, "is missing or empty")
    if data.get("ts") in (None, ""):
        raise _missing("ts", data)
    notes: list[str] = []
    text = _clean(text, "text", notes).strip()
    if not text:
        raise ValueError("'text' is missing or empty")
    ts = _parse_ts(data.get("ts"), tz)
    return ImportRecord(
        id=_clean(str(rid), "id", notes, 200),
        ts=ts,
        speaker=_clean(str(data.get("speaker") or "unknown"), "speaker", notes, 200),
        text=text,
        conversation=_clean(str(data.get("conversation") or "default"), "conversation", notes, 200),
        source="jsonl",
        cleaned=notes,
    )


def _telegram_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in value)
    return ""


def _telegram_chats(data: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(data.get("messages"), list):
        return [data]
    chats = data.get("chats")
    if isinstance(chats, dict) and isinstance(chats.get("list"), list):
        return [c for c in chats["list"] if isinstance(c, dict)]
    raise ImportFileError(
        "this JSON file is not a Telegram Desktop export: it has no 'messages' or 'chats' list"
    )


def read_records(path: Path, tz: ZoneInfo) -> Iterator[tuple[str, ImportRecord | Skipped | str]]:
    """(where, record, skipped or why refused) for every record in the file, in file order."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ImportFileError(f"{path} does not exist") from exc
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc}") from exc
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM some editors write
    stripped = raw.lstrip()
    whole: Any = None
    if stripped.startswith(b"{"):
        try:
            whole = json.loads(stripped.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            whole = None  # several objects, or a bad line among them: JSON Lines
    if isinstance(whole, dict) and ("messages" in whole or "chats" in whole):
        yield from _telegram_records(whole)
        return
    # Lines are cut at "\n" alone (a "\r" before it is dropped) so that line numbers match
    # what editors and `sed -n` show; each line is decoded on its own, so one invalid byte
    # costs one line.
    for n, chunk in enumerate(raw.split(b"\n"), 1):
        if not chunk.strip():
            continue
        try:
            line = chunk.removesuffix(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            yield f"line {n}", f"not valid UTF-8 (byte {exc.start + 1})"
            continue
        try:
            yield f"line {n}", _jsonl_record(line, tz)
        except ValueError as exc:
            yield f"line {n}", str(exc)


def _telegram_records(
    data: dict[str, Any],
) -> Iterator[tuple[str, ImportRecord | Skipped | str]]:
    for chat in _telegram_chats(data):
        chat_id = str(chat.get("id", chat.get("name", "chat")))
        name = str(chat.get("name") or chat_id)
        messages = chat.get("messages") or []
        if not isinstance(messages, list):
            yield f"chat {name!r}", "its messages are not a list of messages"
            continue
        for n, msg in enumerate(messages, 1):
            where = f"message {n} of chat {name!r}"
            if not isinstance(msg, dict):
                yield where, "not a JSON object"
                continue
            if msg.get("type", "message") != "message":
                # Service messages (joins, pins) are not things people said.
                yield where, Skipped("a service message")
                continue
            notes: list[str] = []
            text = _clean(_telegram_text(msg.get("text")), "text", notes).strip()
            if not text:
                yield where, Skipped("no text (a sticker or a photo without caption)")
                continue
            try:
                ts = _parse_ts(
                    int(msg["date_unixtime"]) if "date_unixtime" in msg else msg.get("date"), UTC
                )
            except (ValueError, TypeError, OverflowError) as exc:
                yield where, str(exc)
                continue
            yield (
                where,
                ImportRecord(
                    id=_clean(f"tg:{chat_id}:{msg.get('id', n)}", "id", notes, 200),
                    ts=ts,
                    speaker=_clean(
                        str(msg.get("from") or msg.get("actor") or "unknown"), "from", notes
                    ),
                    text=text,
                    conversation=_clean(name, "chat name", notes),
                    source="telegram",
                    cleaned=notes,
                ),
            )


async def import_file(
    db: Database,
    user_id: int,
    path: Path,
    *,
    timezone: str = "UTC",
    progress: Progress | None = None,
    batch: int = 500,
) -> ImportReport:
    """Store every good record of ``path`` as the user's messages; see the module doc."""
    tz = ZoneInfo(timezone)
    report = ImportReport(file=path.name)
    pending: list[ImportRecord] = []
    for where, rec in read_records(path, tz):
        report.lines += 1
        if isinstance(rec, Skipped):
            report.skipped += 1
            continue
        if isinstance(rec, str):
            report.bad.append((where, rec))
            continue
        if rec.cleaned:
            report.cleaned.append((where, "; ".join(rec.cleaned)))
        else:
            report.read += 1
        pending.append(rec)
        if len(pending) >= batch:
            await _store(db, user_id, pending, report)
            if progress is not None:
                progress(len(pending))
            pending = []
    if pending:
        await _store(db, user_id, pending, report)
        if progress is not None:
            progress(len(pending))
    return report


async def _store(
    db: Database, user_id: int, recs: list[ImportRecord], report: ImportReport
) -> None:
    async with db.session() as s:
        earlier = await MessageRepo(s).texts_by_dedupe_key(
            user_id, [f"import:{user_id}:{rec.legacy_key}" for rec in recs]
        )
        convs: dict[tuple[str, str], int] = {}
        rows: list[dict[str, Any]] = []
        for rec in recs:
            if earlier.get(f"import:{user_id}:{rec.legacy_key}") == rec.text:
                report.duplicates += 1  # imported before content keys, the same message
                continue
            key = (rec.source, rec.conversation)
            if key not in convs:
                conv = await ConversationRepo(s).get_or_create(
                    user_id, Address("import", rec.source, rec.conversation)
                )
                assert conv.id is not None
                convs[key] = conv.id
            meta: dict[str, Any] = {
                "speaker": rec.speaker,
                "import_id": rec.id,
                "conversation": rec.conversation,
                "source": rec.source,
            }
            if rec.link:
                meta["link"] = rec.link
            rows.append(
                {
                    "user_id": user_id,
                    "conversation_id": convs[key],
                    "direction": "in",
                    "role": "user",
                    "channel": "import",
                    "account": rec.source,
                    "chat_id": rec.conversation,
                    "sender_id": rec.speaker,
                    "external_id": rec.id,
                    "dedupe_key": f"import:{user_id}:{rec.key}",
                    "text": rec.text,
                    "status": "stored",
                    "meta": meta,
                    "created_at": rec.ts,
                }
            )
        ids = await MessageRepo(s).add_new_rows(rows)
        report.added += len(ids)
        report.duplicates += len(rows) - len(ids)
        report.message_ids.extend(ids)
        report.conversations.update(convs.values())


async def imported_ids(db: Database, user_id: int, message_ids: list[int]) -> dict[int, str]:
    """Message row id → import id, for showing search hits by the ids people know."""
    if not message_ids:
        return {}
    async with db.session() as s:
        rows = await CursorRepo(s).messages(user_id, message_ids)
    return {r.id: str((r.meta or {}).get("import_id") or r.external_id) for r in rows if r.id}
