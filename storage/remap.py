"""New ids for an imported user's rows, and every reference to them rewritten.

An export keeps each row's id. Imported into a database that already holds other people,
those ids belong to someone else, so every imported row gets a new id (always: one code
path, exercised by every import, rather than a rare "only on collision" branch) and every
value that points at a row is rewritten:

- **hard references**, the foreign keys of the tables' metadata (``user_id``,
  ``conversation_id``...), found by reading the metadata, never listed by hand;
- **soft references**, ids kept without a ForeignKey (a list of message ids in JSON, a
  citation's source, ``conv:12``, a file key ``3/41-0.jpg``), as the features declare them
  (``bot.feature.Reference``, ``FileKind.key_ids``), handed in by the composition root.

A reference to a row the export does not hold points at nothing afterwards (NULL, or 0
where the column cannot be empty, or dropped from a list): never at another person's row
that happens to have the old id. Nothing here touches the database but ``allocate``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.feature import Reference

USER = "user"
"""The user row's table (``{user}`` in a template)."""

_FIELD = re.compile(r"\{([a-z_]+)\}")


def int_id_column(table: Table) -> str | None:
    """The name of the table's own integer id (an autoincrement primary key), if it has one."""
    pk = list(table.primary_key.columns)
    if len(pk) == 1 and pk[0].name == "id" and pk[0].type.python_type is int:
        return "id"
    return None


@dataclass(frozen=True, slots=True)
class Template:
    """A text's start holding ids (``conv:{conversation}``), compiled once."""

    pattern: re.Pattern[str]
    tables: tuple[str, ...]
    """The table of each group, in order."""

    @classmethod
    def of(cls, template: str) -> Template:
        """Compile ``template``: literal text, and ``{table}`` for each id (digits)."""
        parts, tables, at = [], [], 0
        for m in _FIELD.finditer(template):
            parts.append(re.escape(template[at : m.start()]))
            parts.append(r"(\d+)")
            tables.append(m.group(1))
            at = m.end()
        parts.append(re.escape(template[at:]))
        return cls(re.compile("".join(parts)), tuple(tables))

    def rewrite(
        self, value: str, new_id: Callable[[str, int], int | None], *, keep_missing: bool = False
    ) -> str | None:
        """``value`` with its ids new (0: one the import lacks); None if not of this shape.

        ``keep_missing``: an id the import lacks stays as it was (a file key, already the new
        user's own by its first part: two orphaned files must not become one).
        """
        m = self.pattern.match(value)
        if m is None:
            return None
        out, at = [], 0
        for n, table in enumerate(self.tables, start=1):
            out.append(value[at : m.start(n)])
            got = new_id(table, int(m.group(n)))
            out.append(m.group(n) if got is None and keep_missing else str(got or 0))
            at = m.end(n)
        out.append(value[at:])
        return "".join(out)


@dataclass(slots=True)
class IdMap:
    """Old id -> new id, by table, for the rows of one import."""

    new: dict[str, dict[int, int]] = field(default_factory=dict)
    """``{table: {old id: new id}}``."""
    _sorted: dict[str, list[int]] = field(default_factory=dict)

    def get(self, table: str, old: int) -> int | None:
        """The new id of ``table``'s row ``old``; None when the import holds no such row."""
        return self.new.get(table, {}).get(old)

    def mark(self, table: str, old: int) -> int:
        """A position in ``table``'s ids: the new id of the last row at or before it (0)."""
        if table not in self._sorted:
            self._sorted[table] = sorted(self.new.get(table, {}))
        olds = self._sorted[table]
        i = bisect.bisect_right(olds, old)
        return self.new[table][olds[i - 1]] if i else 0


async def allocate(conn: AsyncConnection, table: Table, count: int) -> list[int]:
    """``count`` fresh ids of ``table``, ascending, that no row has and no insert will take.

    PostgreSQL takes them from the id's sequence (safe beside other writers). SQLite has one
    writer at a time and the import's transaction has written already (the user row), so
    the ids after the largest are free until it commits.
    """
    if count == 0:
        return []
    if conn.dialect.name == "postgresql":
        rows = await conn.execute(
            text("SELECT nextval(pg_get_serial_sequence(:t, 'id')) FROM generate_series(1, :n)"),
            {"t": f'"{table.name}"', "n": count},
        )
        return sorted(int(r[0]) for r in rows)
    top = (await conn.execute(select(func.max(table.c.id)))).scalar() or 0
    return list(range(int(top) + 1, int(top) + 1 + count))


class Remapper:
    """Rewrites the rows of one import through an ``IdMap`` and the declared references."""

    def __init__(self, ids: IdMap, references: Iterable[Reference]) -> None:
        self.ids = ids
        self.by_column: dict[tuple[str, str], list[Reference]] = {}
        """Declared references, by (table, column)."""
        for ref in references:
            self.by_column.setdefault((ref.table, ref.column), []).append(ref)
        self._templates: dict[str, Template] = {}
        self._plans: dict[str, tuple[str | None, list[tuple[str, str, bool]], list[str]]] = {}

    def template(self, template: str) -> Template:
        """The compiled ``template`` (compiled once)."""
        if template not in self._templates:
            self._templates[template] = Template.of(template)
        return self._templates[template]

    def new_id_columns(self, table: Table) -> set[str]:
        """Columns of ``table`` holding new ids after the import: no row here can share them.

        Its own id, foreign keys to rows with new ids, plain references to a table.
        """
        hard = {c for c, _t, _n in self._plan(table)[1]}
        soft = {
            c
            for (t, c), refs in self.by_column.items()
            if t == table.name and all((r.target or r.by) and not r.path for r in refs)
        }
        own = int_id_column(table)
        return hard | soft | ({own} if own else set())

    def _plan(self, table: Table) -> tuple[str | None, list[tuple[str, str, bool]], list[str]]:
        """Worked out once per table: own id, foreign keys, columns with soft references.

        The foreign keys as (column, target table, nullable), those of rows with new ids.
        """
        if table.name not in self._plans:
            fks = []
            for column in table.columns:
                for fk in column.foreign_keys:
                    target = fk.column.table
                    if int_id_column(target) is None and target.name != USER:
                        continue  # a text id (a pendant session's): kept as it is
                    fks.append((column.name, target.name, bool(column.nullable)))
            soft = [c for (t, c) in self.by_column if t == table.name]
            self._plans[table.name] = (int_id_column(table), fks, soft)
        return self._plans[table.name]

    def row(self, table: Table, old: dict[str, Any]) -> dict[str, Any]:
        """``old`` (decoded values) with its own id, foreign keys and soft references new."""
        new = dict(old)
        id_col, fks, soft = self._plan(table)
        if id_col is not None and old.get(id_col) is not None:
            new[id_col] = self.ids.get(table.name, int(old[id_col]))
        for name, target, nullable in fks:
            value = old.get(name)
            if value is not None:
                mapped = self.ids.get(target, int(value))
                new[name] = mapped if mapped is not None or nullable else 0
        for name in soft:
            if old.get(name) is not None:
                new[name] = self._soft(self.by_column[(table.name, name)], old, new, old[name])
                if new[name] is None and not table.c[name].nullable:
                    new[name] = 0  # points at nothing (ids start at 1)
        return new

    def _soft(
        self, refs: Sequence[Reference], old: dict[str, Any], new: dict[str, Any], value: Any
    ) -> Any:
        plain = [r for r in refs if not r.path]
        in_json = [r for r in refs if r.path]
        if plain:
            value = self._plain(plain, old, new, value)
        if in_json:
            value = _copy(value)
            for ref in in_json:
                self._walk(ref, value, ref.path)
        return value

    def _plain(
        self, refs: Sequence[Reference], old: dict[str, Any], new: dict[str, Any], value: Any
    ) -> Any:
        for ref in refs:
            if ref.template:
                if isinstance(value, str):
                    done = self.template(ref.template).rewrite(value, self.ids.get)
                    if done is not None:
                        return done  # the first template of its shape wins
                continue
            if ref.same_as:
                if str(value) == str(old.get(ref.same_as)):
                    return type(value)(new.get(ref.same_as))
                continue
            target = self._target(ref, old)
            if target is None:
                continue
            return self._id(ref, target, value)
        return value

    def _target(self, ref: Reference, holder: dict[str, Any]) -> str | None:
        if ref.by:
            return dict(ref.targets).get(str(holder.get(ref.by)))
        return ref.target or None

    def _id(self, ref: Reference, target: str, value: Any) -> Any:
        """One id, new: same type as it was (an int, or digits as text); None if dangling."""
        if isinstance(value, bool) or not str(value).isdigit():
            return value  # not an id at all (text a person typed): left alone
        old = int(value)
        got = self.ids.mark(target, old) if ref.mark else self.ids.get(target, old)
        if got is None:
            return None
        return str(got) if isinstance(value, str) else got

    def _walk(self, ref: Reference, node: Any, path: tuple[str, ...]) -> None:
        """Rewrite, in place, the ids at ``path`` under ``node`` (a JSON value)."""
        step, rest = path[0], path[1:]
        if step == "*":
            if isinstance(node, list):
                self._every(ref, node, rest)
            return
        if isinstance(node, list) and step.isdigit():  # one element ("1": a button's data)
            at = int(step)
            if at < len(node):
                if rest:
                    self._walk(ref, node[at], rest)
                else:
                    node[at] = self._leaf(ref, ref.target or None, node[at], None)
            return
        if not isinstance(node, dict) or step not in node:
            return
        if rest:
            self._walk(ref, node[step], rest)
            return
        target = self._target(ref, node) if ref.by else ref.target
        if target is None and not ref.template:
            return
        node[step] = self._leaf(ref, target, node[step], node)

    def _every(self, ref: Reference, node: list[Any], rest: tuple[str, ...]) -> None:
        """Each element of a list: walked on, or (the path's end) an id, dropped if dangling."""
        if rest:
            for item in node:
                self._walk(ref, item, rest)
            return
        kept = [self._leaf(ref, ref.target, item, None) for item in node]
        node[:] = [k for k in kept if k is not None]

    def _leaf(self, ref: Reference, target: str | None, value: Any, holder: Any) -> Any:
        if value is None:
            return None
        if ref.template:
            if not isinstance(value, str):
                return value
            done = self.template(ref.template).rewrite(value, self.ids.get)
            return value if done is None else done
        assert target is not None
        return self._id(ref, target, value)

    def file_key(self, template: str, key: str) -> str | None:
        """A stored file's key with its ids new; None when it is not of the kind's shape."""
        return self.template(template).rewrite(key, self.ids.get, keep_missing=True)


def _copy(value: Any) -> Any:
    """A deep copy of a JSON value (rewritten in place, the decoded export stays as read)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
