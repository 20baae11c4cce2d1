"""MEMORY.md: one user's facts and rules as a Markdown file they can read, edit and give back.

The file (``render``)::

    # What lifebot remembers about Ana
    <!-- lifebot memory file; written 2026-03-10T12:00:00Z. ... how to edit ... -->

    ## Rules
    - Never book meetings before 10 <!-- #14 v2026-03-01T10:00:00Z -->

    ## People
    - My sister is Ana <!-- #3 v2026-02-11T09:12:00Z -->

Each fact is one list item under the heading of its category; the comment at its end is its
marker: the fact's id and version (when it last changed). The person edits the words of a
line to change a fact, deletes a line to forget it, and writes a new "- ..." line under a
heading (no marker) to teach one. ``parse`` reads a file back; ``plan`` compares it with the
user's facts now (pure: no I/O); ``apply`` carries the plan out.

A fact changed or forgotten in chat after the file was written is never overwritten by the
file: if the file edits or removes it too, that is a ``Conflict``, shown with both versions;
everything else in the file is applied. Without the "written" line or the end line (``END``),
removals are not applied (a missing line then means nothing certain: a partial copy, a cut).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.agent.memory.facts import CATEGORIES, FACT_SIZE, FactKeeper, fact_fits, guess_category
from bot.agent.rules import RULE_CATEGORY
from storage.models import Fact
from storage.repos.facts import FactRepo, fact_hash

log = logging.getLogger(__name__)

HEADINGS = {
    RULE_CATEGORY: "Rules",
    "people": "People",
    "preferences": "Preferences",
    "events": "Events",
    "work": "Work",
    "health": "Health",
    "notes": "Notes",
}
"""Category -> its heading, in the file's order (rules first: they are hard rules)."""
_BY_HEADING = {v.lower(): k for k, v in HEADINGS.items()}
_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"
_MARKER = re.compile(r"\s*<!--\s*#(?P<id>\d+)\s+v(?P<version>" + _STAMP + r")\s*-->\s*$")
_WRITTEN = re.compile(
    r"^\s*<!--\s*lifebot memory file; written (?P<at>" + _STAMP + ")", re.MULTILINE
)
"""The "written" line: at the start of a line, so a fact quoting it is not taken for it."""
_ITEM = re.compile(r"^\s*[-*+\u2022\u25e6\u2023]\s+(?P<text>.*\S)\s*$")
"""A list item; "•" too: chat apps show "- " as a bullet, and that is what gets copied back."""
_HEADING = re.compile(r"^\s*##\s+(?P<name>.+?)\s*#*\s*$")
_SHOWN_HEADING = re.compile(r"^\s*[*_]*\s*(?P<name>[A-Za-z]+)\s*[*_]*\s*$")
"""A heading as a chat app shows it (bold, "##" gone): counts only when it names a heading."""
END = "<!-- end of the lifebot memory file -->"
"""The file's last line: without it the file was cut short, and no line counts as deleted."""
MAX_FILE_CHARS = 200_000
"""A memory file longer than this is refused (a person's facts fit in far less)."""
MAX_NEW_FACTS = 50
"""New lines one file may add: each is checked against every fact the person has (and may
ask the model), so a pasted list of thousands would hold the request for hours."""


class MemoryFileError(ValueError):
    """The file cannot be read as a memory file; the message says why in plain words."""


def version(fact: Fact) -> str:
    """The fact's version as written in its marker (its last change, to the second, UTC)."""
    return _stamp(fact.updated_at)


def _stamp(at: datetime, *, exact: bool = False) -> str:
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if exact else "%Y-%m-%dT%H:%M:%SZ")


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def render(facts: Sequence[Fact], *, name: str, written_at: datetime) -> str:
    """The memory file of these (active) facts, grouped by category."""
    lines = [
        f"# What lifebot remembers about {name}",
        f"<!-- lifebot memory file; written {_stamp(written_at, exact=True)}. "
        "Edit the words of a line to change a fact, delete a line to forget it, add a line "
        "starting with '- ' under a heading to teach a new one. Keep the marker at the end of "
        "each line (#id and version): it says which fact the line is. -->",
        "",
    ]
    by_category: dict[str, list[Fact]] = {}
    for f in facts:
        key = f.category if f.category in HEADINGS else "notes"
        by_category.setdefault(key, []).append(f)
    for category, heading in HEADINGS.items():
        lines.append(f"## {heading}")
        for f in by_category.get(category, []):
            text = " ".join(f.text.split())
            lines.append(f"- {text} <!-- #{f.id} v{version(f)} -->")
        lines.append("")
    lines.append(END)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class FileLine:
    """One fact line of a memory file."""

    line: int
    """Its line number (1-based), for messages."""
    text: str
    category: str
    fact_id: int | None = None
    """The marker's fact id; None for a line the person added."""
    version: str | None = None


@dataclass(slots=True)
class MemoryFile:
    """What a memory file says."""

    lines: list[FileLine] = field(default_factory=list)
    written_at: datetime | None = None
    """When lifebot wrote it (None: the line saying so was removed)."""
    whole: bool = True
    """It ends with lifebot's last line (False: cut short, or that line was removed)."""
    stray: list[str] = field(default_factory=list)
    """Lines with words that are neither a heading nor a "- " item (a fact typed without its
    dash), numbered, to point out rather than ignore."""


def read_file(path: Path) -> str:
    """A memory file's text from disk: UTF-8 (with a byte order mark or not) or UTF-16.

    UTF-16 is what Windows editors call "Unicode". Raises OSError, UnicodeDecodeError, or
    MemoryFileError when it is too big to be one (checked before reading it).
    """
    if path.stat().st_size > 4 * MAX_FILE_CHARS:
        raise MemoryFileError(f"the file is longer than {MAX_FILE_CHARS} characters")
    raw = path.read_bytes()
    utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff"))
    return raw.decode("utf-16" if utf16 else "utf-8-sig")


def parse(text: str) -> MemoryFile:
    """Read a memory file; anything but headings and list items is ignored (notes, blanks)."""
    if len(text) > MAX_FILE_CHARS:
        raise MemoryFileError(f"the file is longer than {MAX_FILE_CHARS} characters")
    text = text.removeprefix("\ufeff")  # a byte order mark (Windows editors write one)
    text = text.replace("\x00", "")  # a binary paste: PostgreSQL keeps no NUL in text
    out = MemoryFile()
    written = _WRITTEN.search(text)
    if written is not None:
        try:
            out.written_at = _when(written.group("at"))
        except ValueError as exc:
            raise MemoryFileError(
                f"the 'written' date {written.group('at')!r} is not a date"
            ) from exc
    out.whole = any(raw.strip() == END for raw in text.splitlines())  # a line of its own
    category = "notes"
    for n, raw in enumerate(text.splitlines(), start=1):
        heading = _HEADING.match(raw)
        if heading is not None:
            name = heading.group("name").strip().lower()
            category = _BY_HEADING.get(name, name if name in CATEGORIES else "")
            continue
        shown = _SHOWN_HEADING.match(raw)
        if shown is not None and shown.group("name").lower() in _BY_HEADING:
            category = _BY_HEADING[shown.group("name").lower()]
            continue
        item = _ITEM.match(raw)
        if item is None:
            if _is_stray(raw):
                out.stray.append(f"line {n}: {' '.join(raw.split())[:120]}")
            continue
        body = item.group("text")
        marker = _MARKER.search(body)
        fact_id = fact_version = None
        if marker is not None:
            fact_id, fact_version = int(marker.group("id")), marker.group("version")
            body = body[: marker.start()]
        body = " ".join(body.split())
        if not body:
            continue  # an emptied line: the same as a deleted one
        cat = category or guess_category(body)
        out.lines.append(FileLine(n, body, cat, fact_id, fact_version))
    return out


_OURS = ("#", "<!--", "What lifebot remembers about", "Edit it and send it back")
"""How lines lifebot writes around the facts begin (the title, comments, the chat's note)."""


def _is_stray(raw: str) -> bool:
    """A line with words that is none of lifebot's own: the person meant something by it."""
    line = raw.strip()
    return bool(line) and not line.startswith(_OURS)


@dataclass(frozen=True, slots=True)
class Conflict:
    """A fact the file and the chat both changed since the file was written."""

    fact_id: int
    in_file: str | None
    """What the file says now (None: the file removed it)."""
    now: str | None
    """What lifebot holds now, after the change made in chat (None: forgotten in chat)."""
    now_marker: str | None = None
    """The marker of what lifebot holds now (``#id vversion``): ``settle`` puts it on the line."""

    def describe(self) -> str:
        """Both versions in plain words."""
        file_side = f'the file says "{self.in_file}"' if self.in_file else "the file removes it"
        chat_side = f'in chat it became "{self.now}"' if self.now else "in chat it was forgotten"
        return f"#{self.fact_id}: {file_side}, but since the file was written {chat_side}."


def settle(text: str, conflicts: Sequence[Conflict]) -> str:
    """The person's copy, its conflicting lines now naming what lifebot holds since.

    Shown back beside both versions: saving it again keeps the file's words (the person has
    seen the chat's). A line whose fact was forgotten in chat loses its marker: a new fact.
    """
    by_id = {c.fact_id: c for c in conflicts if c.in_file is not None}
    lines = text.splitlines(keepends=True)
    for n, raw in enumerate(lines):
        body = raw.rstrip("\r\n")
        marker = _MARKER.search(body) if _ITEM.match(body) else None
        found = by_id.get(int(marker.group("id"))) if marker is not None else None
        if marker is None or found is None:
            continue
        now = f" <!-- {found.now_marker} -->" if found.now_marker else ""
        lines[n] = body[: marker.start()] + now + raw[len(body) :]
    return "".join(lines)


@dataclass(slots=True)
class Plan:
    """What applying a memory file will do."""

    add: list[FileLine] = field(default_factory=list)
    change: list[tuple[Fact, FileLine]] = field(default_factory=list)
    remove: list[Fact] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    kept_new: list[Fact] = field(default_factory=list)
    """Facts added in chat after the file was written (not in it, and kept)."""
    removals_skipped: bool = False
    """The file has no "written" line, so lines missing from it were not taken as removals."""
    emptied: bool = False
    """The file has no fact lines at all: nothing is forgotten on its say-so."""
    cut_short: bool = False
    """The file's last line is missing: what was cut off is not taken as removed."""
    not_read: list[str] = field(default_factory=list)
    """Lines that are no heading and no "- " item (``MemoryFile.stray``)."""


def _current(fact: Fact, by_id: dict[int | None, Fact]) -> Fact | None:
    """The active fact a superseded one became (None when the chain ends forgotten)."""
    seen: set[int] = set()
    while fact.superseded_by is not None and fact.superseded_by not in seen:
        seen.add(fact.superseded_by)
        nxt = by_id.get(fact.superseded_by)
        if nxt is None:
            return None
        fact = nxt
    return fact if fact.forgotten_at is None and fact.superseded_by is None else None


def plan(parsed: MemoryFile, facts: Sequence[Fact]) -> Plan:
    """Compare a memory file with every fact of its user (forgotten and superseded too)."""
    by_id: dict[int | None, Fact] = {f.id: f for f in facts if f.id is not None}
    out = Plan(not_read=list(parsed.stray))
    seen = _plan_lines(parsed, by_id, out)
    if parsed.written_at is None:
        out.removals_skipped = True
        return out
    from_lines = len(out.conflicts)
    _plan_missing(parsed.written_at, facts, by_id, seen, out)
    if out.remove or len(out.conflicts) > from_lines:
        # Every line deleted (or an emptied box): too much to forget on a file's say-so; and
        # a copy cut short says nothing about the lines it lost.
        out.emptied = not parsed.lines
        out.cut_short = bool(parsed.lines) and not parsed.whole
        if out.emptied or out.cut_short:
            out.remove, out.removals_skipped = [], True
            del out.conflicts[from_lines:]
    return out


def _says(line: FileLine, fact: Fact) -> bool:
    """The line says exactly what the fact says, under its heading."""
    return line.text == " ".join(fact.text.split()) and line.category == fact.category


def _own_markers(lines: list[FileLine], by_id: dict[int | None, Fact]) -> list[FileLine]:
    """The lines, with a marker copied onto a second line taken off that line.

    A copied line (marker and all) is a new fact: the line that still says what the fact
    says keeps the marker (else the first), so splitting a fact in two loses neither half.
    """
    keeps: dict[int, FileLine] = {}
    for line in lines:
        fact = by_id.get(line.fact_id) if line.fact_id is not None else None
        if fact is None or fact.id is None:
            continue
        first = keeps.get(fact.id)
        if first is None or (not _says(first, fact) and _says(line, fact)):
            keeps[fact.id] = line
    kept = set(map(id, keeps.values()))
    return [
        ln
        if ln.fact_id is None or id(ln) in kept or ln.fact_id not in keeps
        else FileLine(ln.line, ln.text, ln.category)
        for ln in lines
    ]


def _plan_lines(parsed: MemoryFile, by_id: dict[int | None, Fact], out: Plan) -> set[int]:
    """Adds, changes and conflicts from the file's lines; the ids of the facts they name."""
    seen: set[int] = set()
    lines = _own_markers(parsed.lines, by_id)
    new: list[FileLine] = []
    for line in lines:
        fact = by_id.get(line.fact_id) if line.fact_id is not None else None
        if fact is None:
            new.append(line)  # a new line, or a marker naming no fact of this user
            continue
        seen.add(fact.id or 0)
        active = fact.forgotten_at is None and fact.superseded_by is None
        if _says(line, fact):
            continue  # unchanged in the file: whatever chat did since stands
        if active and line.version in (None, version(fact)):
            out.change.append((fact, line))
            continue
        now = fact if active else _current(fact, by_id)
        if now is not None:
            seen.add(now.id or 0)
            if _says(line, now):
                continue  # the file's edit is what lifebot holds already (applied before)
        # changed in the file and, since it was written, in chat: both are shown
        marker = f"#{now.id} v{version(now)}" if now is not None else None
        out.conflicts.append(Conflict(fact.id or 0, line.text, now.text if now else None, marker))
    # A new line in the words of a fact lifebot holds is that fact (it keeps its sources).
    holding = {
        fact_hash(f.text): f
        for f in by_id.values()
        if f.forgotten_at is None and f.superseded_by is None
    }
    changing = {f.id for f, _ in out.change}
    for line in new:
        known = holding.get(fact_hash(line.text))
        if known is None or known.id is None or known.id in changing:
            out.add.append(line)  # new words, or the old words of a line reworded here
            continue
        if known.id not in seen and line.category != known.category:
            out.change.append((known, line))  # the same words under another heading
        seen.add(known.id)
    return seen


def _plan_missing(
    written: datetime,
    facts: Sequence[Fact],
    by_id: dict[int | None, Fact],
    seen: set[int],
    out: Plan,
) -> None:
    """Facts not in the file: removed by the person, or learned in chat after it was written."""
    for fact in facts:
        if fact.id is None or fact.id in seen:
            continue
        existed = _aware(fact.created_at) <= written
        active = fact.forgotten_at is None and fact.superseded_by is None
        if active:
            # not in the file, but brought back or changed in chat since: chat's is newer
            since = not existed or _aware(fact.updated_at) > written
            (out.kept_new if since else out.remove).append(fact)
        elif existed and fact.superseded_by is not None and _aware(fact.updated_at) > written:
            # removed from the file, but changed in chat since: keep the change, show both
            now = _current(fact, by_id)
            if now is not None and now.id not in seen:
                out.conflicts.append(Conflict(fact.id, None, now.text))
                seen.add(now.id or 0)


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@dataclass(slots=True)
class ApplyReport:
    """What applying a memory file did, for the person."""

    added: list[str] = field(default_factory=list)
    changed: list[tuple[str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    kept_new: list[str] = field(default_factory=list)
    not_added: list[str] = field(default_factory=list)
    """New lines not stored, with why ("already known", "too long", "forgotten before")."""
    not_changed: list[str] = field(default_factory=list)
    """Edited lines not applied, with why (too long or too short for one fact)."""
    removals_skipped: bool = False
    emptied: bool = False
    cut_short: bool = False
    not_read: list[str] = field(default_factory=list)
    """Lines neither a heading nor a "- " item, with their numbers."""

    @property
    def nothing(self) -> bool:
        """The file matched lifebot's memory already."""
        return not (
            self.added
            or self.changed
            or self.removed
            or self.conflicts
            or self.not_changed
            or self.not_read
        )

    def describe(self) -> str:
        """The report in plain words, one line per change."""
        out: list[str] = []
        if self.nothing:
            out.append("Nothing to change: the file says what I already remember.")
        out += [f"Added: {t}" for t in self.added]
        out += [f'Changed: "{a}" is now "{b}"' for a, b in self.changed]
        out += [f"Forgotten: {t}" for t in self.removed]
        out += [f"Not added ({why})" for why in self.not_added]
        out += [f"Not changed ({why})" for why in self.not_changed]
        out += [f'Not read (a fact line starts with "- "): {line}' for line in self.not_read]
        out += [f"Kept (learned in chat after the file was written): {t}" for t in self.kept_new]
        if self.emptied:
            out.append(
                "The file has no facts in it, so nothing was forgotten. To forget facts, "
                "delete their lines and keep at least one, or use /forget or the Facts page."
            )
        elif self.cut_short:
            out.append(
                "The file's end line is missing (cut short, or a part not copied), so lines "
                "missing from the file were not forgotten."
            )
        elif self.removals_skipped:
            out.append(
                "The line saying when the file was written is missing, so lines missing from "
                "the file were not forgotten."
            )
        if self.conflicts:
            out.append("Not applied, changed in chat since the file was written:")
            out += [f"- {c.describe()}" for c in self.conflicts]
            out.append(
                "To settle it, edit the fact in chat or in a fresh copy of the file (on the web "
                "page, Save again keeps the file's words)."
            )
        return "\n".join(out)


async def apply(
    keeper: FactKeeper,
    user_id: int,
    todo: Plan,
    now: datetime,
    *,
    sources: list[int] | None = None,
) -> ApplyReport:
    """Carry out a plan for ``user_id``: the file's edits as if the person made them in chat.

    ``sources``: the message the file came in (in chat), the source of the facts it adds.
    """
    report = ApplyReport(
        conflicts=list(todo.conflicts),
        kept_new=[f.text for f in todo.kept_new],
        removals_skipped=todo.removals_skipped,
        emptied=todo.emptied,
        cut_short=todo.cut_short,
        not_read=list(todo.not_read),
    )
    for fact, line in todo.change:
        new = await keeper.replace(user_id, fact.id or 0, line.text, line.category, now)
        if new is not None:
            report.changed.append((fact.text, new.text))
        elif not fact_fits(line.text):
            report.not_changed.append(f"a fact is {FACT_SIZE}: {line.text}")
        else:
            report.not_changed.append(f"it changed meanwhile: {line.text}")
    for fact in todo.remove:
        if await keeper.forget(user_id, fact.id or 0, now) is not None:
            report.removed.append(fact.text)
    for line in todo.add:
        decision = await keeper.remember(
            user_id, line.text, now=now, category=line.category, sources=sources
        )
        if decision.action in ("added", "superseded") and decision.fact is not None:
            report.added.append(decision.fact.text)
        elif decision.action == "known":
            report.not_added.append(f"already known: {line.text}")
        elif decision.action == "rejected":
            report.not_added.append(f"a fact is {FACT_SIZE}: {line.text}")
        else:
            report.not_added.append(f"{decision.action}: {line.text}")
    return report


async def write_for(keeper: FactKeeper, user_id: int, name: str, now: datetime) -> str:
    """The memory file of one user now."""
    async with keeper.db.session() as s:
        facts = await FactRepo(s).active(user_id)
    return render(facts, name=name, written_at=now)


async def apply_text(
    keeper: FactKeeper,
    user_id: int,
    text: str,
    now: datetime,
    *,
    sources: list[int] | None = None,
) -> ApplyReport:
    """Read an edited memory file and apply it to one user's facts (MemoryFileError if bad)."""
    parsed = parse(text)
    if parsed.written_at is not None and parsed.written_at > _aware(now) + timedelta(minutes=5):
        # it decides what counts as "learned in chat since": a later date would forget that
        raise MemoryFileError(
            f"the 'written' date {_stamp(parsed.written_at)} is in the future; nothing was changed"
        )
    async with keeper.db.session() as s:
        facts = await FactRepo(s).every(user_id)
    todo = plan(parsed, facts)
    if len(todo.add) > MAX_NEW_FACTS:  # refused whole: nothing half-applied
        raise MemoryFileError(
            f"the file adds {len(todo.add)} new facts, and one file adds at most "
            f"{MAX_NEW_FACTS}; nothing was changed: add the rest in a later copy"
        )
    report = await apply(keeper, user_id, todo, now, sources=sources)
    # Counts only: what the file says is the person's, not the log's.
    log.info(
        "memory file of user %s applied: %d added, %d changed, %d forgotten, %d conflicts, "
        "%d not taken",
        user_id,
        len(report.added),
        len(report.changed),
        len(report.removed),
        len(report.conflicts),
        len(report.not_added) + len(report.not_changed) + len(report.not_read),
    )
    return report
