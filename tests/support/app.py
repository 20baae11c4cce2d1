"""Plain helpers shared by the app-level tests: settings, users, the recording channel.

Fixtures live in tests/conftest.py; these are ordinary functions any test or bench may import.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.app.build import App
from bot.config import Settings
from storage.db import Database
from storage.models import User
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM

AppFactory = Callable[..., Awaitable[App]]
"""What the ``app_factory`` fixture gives: ``await factory(llm, **settings)`` -> a started App."""


def make_settings(tmp_path: Path, llm: FakeLLM | None = None, **overrides: Any) -> Settings:
    """Settings isolated in ``tmp_path``, pointing at the fake LLM when given."""
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "llm_model": "fake-smart",
        "llm_fast_model": "fake-fast",
        "llm_timeout": 5.0,
        "llm_max_retries": 2,
        "web_enabled": False,  # tests that want the web page start it on a free port
    }
    if llm is not None:
        values.update(openai_base_url=llm.url, openai_api_key="test-key")
    values.update(overrides)
    return Settings(_env_file=None, **values)


_template_lock = threading.Lock()
_template: Path | None = None


def _migrated_template() -> Path:
    """A SQLite file at the newest schema, made once per test process (worker)."""
    global _template  # noqa: PLW0603  (one per process, made on first use)
    with _template_lock:
        if _template is None:
            path = Path(tempfile.mkdtemp(prefix="lifebot-schema-")) / "lifebot.db"

            async def migrate() -> None:
                db = Database(f"sqlite+aiosqlite:///{path}")
                try:
                    await db.migrate()
                finally:
                    await db.dispose()  # the last connection folds the WAL into the file

            # Its own loop in its own thread: callers may be inside a running loop.
            thread = threading.Thread(target=asyncio.run, args=(migrate(),))
            thread.start()
            thread.join()
            _template = path
        return _template


def migrated_sqlite_url(path: Path) -> str:
    """A SQLite database at ``path`` already at the newest schema (a copy of the template)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copyfile(_migrated_template(), path)
    path.chmod(0o600)
    return f"sqlite+aiosqlite:///{path}"


def with_schema(settings: Settings) -> Settings:
    """Give a test's fresh default SQLite database the newest schema by copying a template.

    Migrating from nothing costs about 0.3 s of CPU per app and most tests build one; the
    upgrade path itself is what the migration tests run (they name their own database, or
    start from a file that exists, and are left alone here). The copy is made as lifebot makes
    its own files: the folder 0700, the file 0600 (``start_app`` checks both again).
    """
    if settings.database_url_setting is not None:
        return settings
    target = settings.data_dir / "lifebot.db"
    if not target.exists():
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(_migrated_template(), target)
        target.chmod(0o600)
    return settings


def channel(application: App, name: str = "fake") -> RecordingChannel:
    """The recording channel registered under ``name``."""
    adapter = application.dispatcher.adapters[name]
    assert isinstance(adapter, RecordingChannel)
    return adapter


async def add_user(
    application: App,
    sender: str = "u1",
    *,
    channel_name: str = "fake",
    owner: bool = False,
    account: str = "acct",
    name: str | None = None,
    timezone: str = "UTC",
) -> User:
    """A paired user with one identity (chat id = sender id)."""
    async with application.db.session() as s:
        repo = UserRepo(s)
        user = await repo.create(name or sender, is_owner=owner, timezone=timezone)
        assert user.id is not None
        await repo.add_identity(user.id, channel_name, account, sender, chat_id=sender)
    return user
