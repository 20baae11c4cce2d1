"""Plain helpers shared by the app-level tests: settings, users, the recording channel.

Fixtures live in tests/conftest.py; these are ordinary functions any test or bench may import.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.app.build import App
from bot.config import Settings
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
