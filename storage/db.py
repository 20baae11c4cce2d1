"""Engine and session factory: SQLite by default (WAL, foreign keys), PostgreSQL by URL.

Schema changes go through Alembic migrations (``storage/migrations``), applied at start-up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from sqlmodel.ext.asyncio.session import AsyncSession

from bot.errors import NewerDatabaseError, StorageError
from storage import sqlite_driver
from storage.locks import MIGRATION_KEY
from storage.repos._conn import FROZEN_HOLDER_LIMIT, HOLDER_LIMIT_KEY

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets readers run beside the single writer; busy_timeout makes concurrent writers
    # wait instead of failing with "database is locked".
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=15000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def limit_idle_transactions(engine: Engine, seconds: float) -> None:
    """Have PostgreSQL end ``engine``'s transactions that idle ``seconds`` between statements.

    Such a transaction's process is frozen or gone; ending it releases the rows it locked.
    Set by a ``SET`` on each new connection, not as a startup parameter: a connection pooler
    such as PgBouncer refuses startup parameters it does not know.
    """
    millis = int(seconds * 1000)

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Outside any transaction, so that no rollback undoes it (SQLAlchemy's way for SET).
        was = dbapi_conn.autocommit
        dbapi_conn.autocommit = True
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"SET idle_in_transaction_session_timeout = {millis}")
        finally:
            cur.close()
            dbapi_conn.autocommit = was

    event.listen(engine, "connect", on_connect)


def _commit_and_close(session: Session) -> None:
    """Commit a unit of work, then release its connection (on SQLAlchemy's sync side)."""
    try:
        session.commit()
    finally:
        session.close()


FROZEN_TRANSACTION_LIMIT = 60.0
"""Seconds a PostgreSQL transaction of ours may wait between two statements before the server
ends it, and with it the row locks it holds. No unit of work waits on the network or the
model inside its transaction, so only a frozen (SIGSTOP, a paused VM) or vanished process
reaches it; without it, whoever needed its rows next (the next leader, another process's
turn) would wait for as long as it stayed frozen. The leader's lease and the outbox's rows
set a tighter limit for themselves (``repos._conn.bound_idle``). Locks held on purpose for a
whole turn live on their own engine (``storage.locks``) and are not limited."""


class Database:
    """Owns the async engine; hands out sessions; applies migrations."""

    def __init__(
        self,
        url: str,
        *,
        echo: bool = False,
        one_trip: bool = True,
        frozen_limit: float = FROZEN_TRANSACTION_LIMIT,
        holder_limit: float = FROZEN_HOLDER_LIMIT,
    ) -> None:
        """Open nothing yet; ``one_trip``: how SQLite statements reach aiosqlite's thread.

        True (the default): one trip each (``storage/sqlite_driver.py``); False keeps
        SQLAlchemy's stock adapter (the dispatch bench's same-run baseline).
        ``frozen_limit``: on PostgreSQL, the seconds a transaction may wait between two
        statements before the server ends it (``FROZEN_TRANSACTION_LIMIT``).
        ``holder_limit``: the same, tighter, for the transactions that lock rows another
        process must take over (``repos._conn.bound_idle``; ``FROZEN_HOLDER_LIMIT``).
        """
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.path: Path | None = None
        """The SQLite database file, if there is one."""
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            path = url.split(":///", 1)[1] if ":///" in url else ""
            if path and path != ":memory:":
                self.path = Path(path)
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": 15}
            if one_trip and url.startswith("sqlite+aiosqlite"):
                kwargs["module"] = sqlite_driver.DBAPI  # one trip per statement
        else:
            kwargs["pool_pre_ping"] = True
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        elif frozen_limit > 0:
            limit_idle_transactions(self.engine.sync_engine, frozen_limit)
        self._sessions = async_sessionmaker(
            self.engine,
            class_=AsyncSession,
            expire_on_commit=False,
            info={HOLDER_LIMIT_KEY: holder_limit},
        )

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session committed on success and rolled back on error; closed either way.

        On success the commit and the close are one call on the session (one hand-over to
        SQLAlchemy's sync side), not two plus a shielded task for the close: every message
        takes several units of work, so this is on the per-message path (issue 28). Should
        that call fail or be cancelled, the close is made again the guarded way (a closed
        session closes again as a no-op).
        """
        session = self._sessions()
        try:
            yield session
        except BaseException:
            async with session:  # closed even if cancelled meanwhile
                await session.rollback()
            raise
        try:
            await session.run_sync(_commit_and_close)
        except BaseException:
            async with session:
                await session.rollback()
            raise

    async def migrate(self, revision: str = "head") -> None:
        """Bring the schema to ``revision`` (the newest migration by default)."""
        if revision == "head" and await self._at_head():
            return  # nothing to do, and Alembic (slow to import) stays unloaded
        try:
            current = await self.current_revision()
        except StorageError:
            current = None  # unreachable: the migration below says so, in its own words
        self._known(current)
        try:
            async with self.engine.connect() as conn:
                if self.is_sqlite:
                    # SQLite changes a column by rebuilding the table; with foreign keys on,
                    # dropping the old copy of a referenced table fails once rows exist. The
                    # pragma only takes effect outside a transaction, so it comes first.
                    await conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
                else:
                    # Several processes starting together on a fresh database: one migrates,
                    # the others wait here and then find nothing left to do.
                    await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_KEY})
                try:
                    await conn.run_sync(_upgrade, revision)
                except BaseException:
                    if not self.is_sqlite:
                        # A session lock outlives a rollback: close the connection, not pool it.
                        await conn.invalidate()
                    raise
                if self.is_sqlite:
                    broken = (await conn.exec_driver_sql("PRAGMA foreign_key_check")).all()
                    if broken:
                        raise StorageError(
                            f"migration left {len(broken)} rows pointing at missing rows"
                        )
                await conn.commit()
                if self.is_sqlite:
                    await conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                else:
                    await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_KEY})
                    await conn.commit()
        except (SQLAlchemyError, OSError) as exc:
            raise StorageError(
                f"could not open or migrate the database at {self.safe_url}: {_first_line(exc)}"
            ) from exc

    async def current_revision(self) -> str | None:
        """The schema's revision (None for an empty database); raises StorageError."""
        try:
            async with self.engine.connect() as conn:
                exists = await conn.run_sync(lambda c: inspect(c).has_table("alembic_version"))
                if not exists:
                    return None
                row = (await conn.execute(text("SELECT version_num FROM alembic_version"))).first()
        except (SQLAlchemyError, OSError) as exc:
            raise StorageError(
                f"cannot reach the database at {self.safe_url}: {_first_line(exc)}"
            ) from exc
        return str(row[0]) if row else None

    async def pending_migrations(self) -> list[str]:
        """Revisions not applied yet, oldest first (nothing is changed)."""
        current = self._known(await self.current_revision())
        chain = migration_chain()
        return chain[chain.index(current) + 1 :] if current in chain else chain

    def _known(self, current: str | None) -> str | None:
        """``current``, unless a newer lifebot wrote it: then a StorageError saying so."""
        if current is not None and current not in migration_chain():
            raise NewerDatabaseError(
                f"the database at {self.safe_url} is at schema revision {current!r}, which "
                "this lifebot does not know: a newer lifebot has upgraded it"
            )
        return current

    async def _at_head(self) -> bool:
        try:
            chain = migration_chain()
            return bool(chain) and await self.current_revision() == chain[-1]
        except StorageError:
            return False  # let the migration itself report the problem

    async def ping(self) -> None:
        """Raise StorageError when the database cannot be reached."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except (SQLAlchemyError, OSError) as exc:
            raise StorageError(
                f"cannot reach the database at {self.safe_url}: {_first_line(exc)}"
            ) from exc

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden, for logs and messages."""
        return self.engine.url.render_as_string(hide_password=True)

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()


_REVISION = re.compile(r'^revision\s*(?::\s*str\s*)?=\s*["\']([^"\']+)["\']', re.MULTILINE)
_DOWN = re.compile(r'^down_revision\s*(?::[^=]+)?=\s*(?:["\']([^"\']+)["\']|None)', re.MULTILINE)


def _first_line(exc: BaseException) -> str:
    """An error's own words without SQLAlchemy's statement and help-link lines."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


def migration_chain() -> list[str]:
    """The revisions in ``migrations/versions``, oldest first (read from the files).

    Read without Alembic so a start-up on an up-to-date database does not import it; a
    branched history (which lifebot never has) yields [] and the caller falls back to Alembic.
    """
    parent: dict[str | None, str] = {}
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        rev, down = _REVISION.search(source), _DOWN.search(source)
        if rev is None or down is None:
            continue
        if down.group(1) in parent:
            return []
        parent[down.group(1)] = rev.group(1)
    chain: list[str] = []
    at: str | None = None
    while at in parent:
        at = parent[at]
        chain.append(at)
    return chain if len(chain) == len(parent) else []


def _upgrade(connection: Connection, revision: str) -> None:
    from alembic import command  # noqa: PLC0415  # slow to import; only needed to change
    from alembic.config import Config  # noqa: PLC0415

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)
