"""Engine and session factory: SQLite by default (WAL, foreign keys), PostgreSQL by URL.

Schema changes go through Alembic migrations (``storage/migrations``), applied at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

from bot.errors import StorageError

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


class Database:
    """Owns the async engine; hands out sessions; applies migrations."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
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
        else:
            kwargs["pool_pre_ping"] = True
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        self._sessions = async_sessionmaker(
            self.engine, class_=AsyncSession, expire_on_commit=False
        )

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session committed on success and rolled back on error."""
        async with self._sessions() as session:
            try:
                yield session
                await session.commit()
            except BaseException:
                await session.rollback()
                raise

    async def migrate(self, revision: str = "head") -> None:
        """Bring the schema to ``revision`` (the newest migration by default)."""
        try:
            async with self.engine.connect() as conn:
                if self.is_sqlite:
                    # SQLite changes a column by rebuilding the table; with foreign keys on,
                    # dropping the old copy of a referenced table fails once rows exist. The
                    # pragma only takes effect outside a transaction, so it comes first.
                    await conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
                await conn.run_sync(_upgrade, revision)
                if self.is_sqlite:
                    broken = (await conn.exec_driver_sql("PRAGMA foreign_key_check")).all()
                    if broken:
                        raise StorageError(
                            f"migration left {len(broken)} rows pointing at missing rows"
                        )
                await conn.commit()
                if self.is_sqlite:
                    await conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        except SQLAlchemyError as exc:
            raise StorageError(f"could not migrate the database at {self.safe_url}: {exc}") from exc

    async def ping(self) -> None:
        """Raise StorageError when the database cannot be reached."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except (SQLAlchemyError, OSError) as exc:
            raise StorageError(f"cannot reach the database at {self.safe_url}: {exc}") from exc

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden, for logs and messages."""
        return self.engine.url.render_as_string(hide_password=True)

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()


def _upgrade(connection: Connection, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)
