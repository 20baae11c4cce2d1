"""What a feature declares: the one shape every feature of lifebot takes (issue 28).

A feature is a package plus one ``FEATURE = Feature(...)`` in its ``feature.py``, registered
once in ``bot/app/features.py``. The declaration is data, read without building anything:
the shared machinery iterates every registered feature instead of lists kept by hand.

- export, import, delete-my-data, backup and restore walk every feature's ``tables`` and
  ``files``;
- the file store refuses a kind of file no feature declared, and keeps every kind with the
  same modes (0700 folders, 0600 files) on the same backend;
- log redaction is built from every feature's ``secrets`` (setting values and text shapes);
- the request layer reads each feature's ``routes``: who may call them (checked before the
  body is read) and how big a body may be;
- the agent's tool offer is routed by every feature's ``intents``; a tool whose group no
  feature declares fails the contract tests;
- the dispatcher hands each declared ``inputs`` kind (a shared location, a document, a
  photo) to its feature's handler instead of keeping a branch per feature;
- ``tools``, ``commands``, ``jobs`` and ``metrics`` name what the feature registers at run
  time, so the contract tests can tell which feature owns what, and what a feature lacks.

This module is core vocabulary: it imports nothing from the rooms, so a feature at any layer
can declare itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, slots=True)
class FileKind:
    """A kind of file a feature keeps (photos, documents, device audio, charts)."""

    name: str
    """The store's name for the kind (``photos``); also its folder in exports and backups."""
    about: str
    """What the files are, in a few words (shown by ``lifebot doctor`` and in the docs)."""
    per_user: bool = True
    """Keys start with the owner's user id: export and delete-my-data take a user's own."""
    derived: bool = False
    """Rebuilt from the database when missing (a cache): deleted with its user, never
    exported or backed up."""
    key_ids: str = ""
    """Ids in a key beyond the owner's, as a template of the key's start (``{user}/{message}-``:
    a user id, a slash, a message id, a dash, then anything). An import gives rows new ids and
    rewrites keys by it; per-user keys always start ``{user}/`` (implied when empty)."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A column holding ids of rows with no ForeignKey: a soft reference an import rewrites.

    An import gives rows new ids. Foreign keys are read from the tables' metadata; these are
    the ids kept in plain integer, text or JSON columns (a list of message ids, a citation's
    source, ``conv:12``). Each is declared by the feature that writes it. One of ``target``,
    ``template``, ``by`` or ``same_as`` says what the value points at.
    """

    table: str
    """The table holding the column."""
    column: str
    """The column."""
    target: str = ""
    """The table whose ids the value holds (``message``): an integer, or digits as text."""
    path: tuple[str, ...] = ()
    """Inside a JSON column, where the ids sit: keys, ``*`` for every element of a list,
    digits for one element (``("*",)``: a list of ids; ``("images", "*", "path")``;
    ``("buttons", "*", "1")``). Empty: the column itself."""
    template: str = ""
    """The value is text whose start holds ids: ``conv:{conversation}`` (each ``{table}``
    is an id of that table, ``{user}`` the user's); the rest of the text is kept."""
    by: str = ""
    """The target depends on the row: this column of the row (or, with ``path``, this key
    of the JSON object holding the id) names it through ``targets``."""
    targets: tuple[tuple[str, str], ...] = ()
    """With ``by``: (value, table) pairs; a value not listed is not an id (a web citation)."""
    mark: bool = False
    """A position in the target's ids, not a row (``last_message_id``: read up to here): it
    becomes the new id of the last row at or before it."""
    same_as: str = ""
    """The value is an id only where it equals this column's value in the same row (a
    search item's ``ref`` is its message's id when the message has no channel id)."""


@dataclass(frozen=True, slots=True)
class NotReference:
    """A column that looks like it holds ids (``*_id``, ``*_ids``, JSON) but holds none.

    The contract tests want every such column declared one way or the other.
    """

    table: str
    """The table holding the column."""
    column: str
    """The column."""
    why: str
    """Why it is not rewritten, in a few words."""


@dataclass(frozen=True, slots=True)
class Secret:
    """Something that must never reach a log line, at any level, from any logger."""

    name: str
    """What it is, in a few words (``Telegram bot token``)."""
    setting: str | None = None
    """The ``Settings`` field holding it; its value is replaced wherever it appears."""
    shape: str | None = None
    """A regular expression of how it looks in text (a token prefix, a link). The text of
    the first group, if the pattern has one, is kept: ``(lbd_)[\\w-]{8,}`` logs ``lbd_…``."""
    example: str | None = None
    """A made-up text holding one secret of this shape, as it would appear in a log line (a
    link, a URL with a password): the contract tests log it through every logger and look
    for it in the log file. Required with ``shape``."""

    def pattern(self) -> re.Pattern[str] | None:
        """The compiled shape, or None when the secret is known only by its setting."""
        return re.compile(self.shape) if self.shape else None


@dataclass(frozen=True, slots=True)
class IntentWords:
    """Words that ask for a group of tools ("remind" asks for the reminders group)."""

    group: str
    """The tool group (``Tool.group``) these words route to."""
    words: str
    """A regular expression (matched case-insensitively, anywhere in the message). Empty:
    the router picks the group by the question's kind (counts and comparisons), not words."""


class Access(StrEnum):
    """Who may call a route; the request layer checks it before reading the body."""

    PUBLIC = "public"
    """Anyone (health checks, the sign-in page, static files); answers carry no personal data."""
    SESSION = "session"
    """A signed-in browser (the session cookie); forms also carry the CSRF token."""
    OWNER = "owner"
    """A signed-in browser of the owner."""
    BEARER = "bearer"
    """A personal API token in ``Authorization: Bearer``."""
    PATH_TOKEN = "path_token"  # noqa: S105  # a name, not a secret
    """A secret in the path itself (webhooks of apps that cannot send headers: Omi, the
    calendar feed, sign-in links). A route that takes a body hands the request layer its own
    check (``bot/web/app.py``: ``token_checks``), run before the body is read; one that takes
    none may check in its handler."""
    HEADER_TOKEN = "header_token"  # noqa: S105  # a name, not a secret
    """A device or app token in a header or basic auth (OwnTracks, Overland), checked by the
    route's own check before the body is read, like ``PATH_TOKEN``."""


@dataclass(frozen=True, slots=True)
class Route:
    """Paths a feature serves over HTTP and the limits the request layer enforces on them."""

    prefix: str
    """A route's path template, or the start of several (``/api/v1/places`` covers
    ``/api/v1/places/{place_id}``). A route belongs to the longest prefix that matches its
    template whole or up to a ``/``."""
    access: Access
    """Who may call it."""
    max_body: int = 64_000
    """Bytes a request body may hold (declared or streamed); more is refused with 413."""
    max_body_setting: str | None = None
    """A ``Settings`` field (bytes) that sets the limit instead, when the operator may change
    it (the largest upload); a multipart form gets a little room for its envelope."""


class Input(StrEnum):
    """A kind of input a message may carry that one feature takes instead of the agent.

    The dispatcher keeps what every message needs (store, dedupe, identity, access, lock,
    turn, reply) and hands each of these to the feature that declared it, through the
    handler the composition root registers (``bot.chat.InputHandler``).
    """

    LOCATION = "location"
    """A shared position (Telegram's location or live location): taken before anything is
    stored, never a message in the history, never seen by the agent."""
    DOCUMENT = "document"
    """A document attachment (a PDF): kept and indexed; its words, if any, go on to the agent."""
    PHOTO = "photo"
    """A picture attachment: kept and described; the agent looks at it with the words."""


ExportRows = dict[str, list[dict[str, Any]]]
"""An export's rows by table, as read from its JSON (untrusted: any shape)."""
ImportFix = Callable[[ExportRows], int]
"""Changes an export's rows in place so the database takes them (a twin of a row that is
unique now becomes replaced by the first, say); returns how many rows it changed."""


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature's declaration: what it brings, for the shared machinery to act on."""

    name: str
    """Short name (``location``); unique among registered features."""
    about: str
    """One sentence a newcomer reads first."""
    tables: tuple[str, ...] = ()
    """Tables holding its users' data (each has a ``user_id`` column): exported, imported,
    deleted and backed up with the user. Every such table belongs to exactly one feature."""
    files: tuple[FileKind, ...] = ()
    """Kinds of file it keeps through the file store."""
    references: tuple[Reference, ...] = ()
    """Ids it keeps without a ForeignKey (soft references), rewritten when an import gives
    rows new ids."""
    not_references: tuple[NotReference, ...] = ()
    """Id-like or JSON columns of its tables that hold no ids to rewrite, and why."""
    secrets: tuple[Secret, ...] = ()
    """Credentials and token shapes never to be logged."""
    intents: tuple[IntentWords, ...] = ()
    """The tool groups it serves and the words that ask for them."""
    tools: tuple[str, ...] = ()
    """Names of the agent tools it registers."""
    always_offered: tuple[str, ...] = ()
    """Its tools offered whatever the message asks (no group): kept to the few that must be."""
    commands: tuple[str, ...] = ()
    """Chat commands it registers (without the slash), kept in the feature's own package."""
    inputs: tuple[Input, ...] = ()
    """Kinds of message input it takes from the dispatcher (each declared by one feature)."""
    jobs: tuple[str, ...] = ()
    """Scheduled jobs it registers (``location.proposals``)."""
    routes: tuple[Route, ...] = ()
    """HTTP paths it serves (API, pages, webhooks)."""
    metrics: tuple[str, ...] = ()
    """Prometheus metric names it exports at ``/metrics`` (as scraped: a counter's name ends
    in ``_total``); made with ``bot.metrics`` where they are observed."""
    import_fixes: tuple[ImportFix, ...] = ()
    """What settles its rows in an older export that the database now refuses (twins of a
    row now unique), before an import writes anything."""


class Registry:
    """Every registered feature, and the questions the shared machinery asks of them all."""

    def __init__(self, features: tuple[Feature, ...]) -> None:
        names = [f.name for f in features]
        if len(set(names)) != len(names):
            raise ValueError(f"two features share a name: {sorted(names)}")
        self.features = features
        """In registration order."""
        self._table_owner: dict[str, Feature] = {}
        for feature in features:
            for table in feature.tables:
                if table in self._table_owner:
                    other = self._table_owner[table].name
                    raise ValueError(f"table {table!r} is declared by {other} and {feature.name}")
                self._table_owner[table] = feature

    def user_tables(self) -> frozenset[str]:
        """Every table declared to hold users' data."""
        return frozenset(self._table_owner)

    def owner_of_table(self, table: str) -> Feature | None:
        """The feature that declared ``table``, if any."""
        return self._table_owner.get(table)

    def file_kinds(self) -> tuple[FileKind, ...]:
        """Every declared kind of stored file."""
        return tuple(kind for f in self.features for kind in f.files)

    def file_kind(self, name: str) -> FileKind:
        """The declared kind called ``name``; KeyError for a kind no feature declared."""
        for kind in self.file_kinds():
            if kind.name == name:
                return kind
        raise KeyError(f"no registered feature declares the file kind {name!r}")

    def references(self) -> tuple[Reference, ...]:
        """Every declared soft reference."""
        return tuple(r for f in self.features for r in f.references)

    def import_fixes(self) -> tuple[ImportFix, ...]:
        """Every declared fix for an older export's rows, in registration order."""
        return tuple(fix for f in self.features for fix in f.import_fixes)

    def not_references(self) -> tuple[NotReference, ...]:
        """Every column declared to hold no ids to rewrite."""
        return tuple(n for f in self.features for n in f.not_references)

    def secrets(self) -> tuple[Secret, ...]:
        """Every declared secret."""
        return tuple(s for f in self.features for s in f.secrets)

    def intents(self) -> tuple[IntentWords, ...]:
        """Every declared intent (tool group and its words)."""
        return tuple(i for f in self.features for i in f.intents)

    def always_offered(self) -> frozenset[str]:
        """Tools declared to be offered whatever the message asks."""
        return frozenset(t for f in self.features for t in f.always_offered)

    def routes(self) -> tuple[Route, ...]:
        """Every declared route."""
        return tuple(r for f in self.features for r in f.routes)

    def route_for(self, template: str) -> Route | None:
        """The declaration covering a route's path template (the longest prefix), or None."""
        best: Route | None = None
        for route in self.routes():
            p = route.prefix
            covers = (
                template == p
                or (p == "/" and template == "/")
                or (p != "/" and template.startswith(p.rstrip("/") + "/"))
            )
            if covers and (best is None or len(p) > len(best.prefix)):
                best = route
        return best

    def metrics(self) -> tuple[str, ...]:
        """Every declared metric name."""
        return tuple(m for f in self.features for m in f.metrics)

    def input_owners(self, kind: Input) -> tuple[Feature, ...]:
        """Every feature declaring input ``kind`` (the contract tests want exactly one)."""
        return tuple(f for f in self.features if kind in f.inputs)

    def owner_of(self, kind: str, name: str) -> Feature | None:
        """The feature that declared a tool, command, job or metric (``kind`` names which)."""
        for feature in self.features:
            if name in getattr(feature, kind):
                return feature
        return None
