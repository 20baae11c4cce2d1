"""Helpers for the jobs tests: an app on a manual clock, users with settings, outbox rows."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from bot.app.build import App, build_app, start_app
from bot.jobs.service import Jobs
from storage.models import Delivery, User
from storage.repos.users import UserRepo
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM
from tests.support.app import make_settings, with_schema


@asynccontextmanager
async def jobs_app(
    tmp_path: Path,
    clock: ManualClock,
    llm: FakeLLM | None = None,
    **overrides: Any,
) -> AsyncIterator[App]:
    """A started app on ``clock`` (one per "process"; same tmp_path = same database)."""
    overrides.setdefault("jobs_send_rate", 0)  # tests do not wait for pacing
    application = build_app(with_schema(make_settings(tmp_path, llm, **overrides)), clock=clock)
    await start_app(application)
    try:
        yield application
    finally:
        await application.close()


def jobs_of(application: App) -> Jobs:
    """The jobs feature of an app."""
    jobs = application.jobs
    assert isinstance(jobs, Jobs)
    return jobs


async def make_user(
    application: App,
    sender: str,
    *,
    timezone: str = "UTC",
    created: datetime | None = None,
    channels: tuple[str, ...] = ("fake",),
    **settings: Any,
) -> User:
    """A user with one identity per channel (chat id = sender id), created at ``created``."""
    async with application.db.session() as s:
        repo = UserRepo(s)
        user = await repo.create(sender, timezone=timezone)
        if created is not None:
            user.created_at = created
        for key, value in settings.items():
            setattr(user, key, value)
        s.add(user)
        assert user.id is not None
        for ch in channels:
            await repo.add_identity(user.id, ch, "acct", sender, chat_id=sender)
    return user


async def deliveries(
    application: App, kind: str | None = None, where: Callable[[Delivery], bool] | None = None
) -> list[Delivery]:
    """Outbox rows (scheduled kinds only unless ``kind``), oldest first."""
    async with application.db.session() as s:
        q = select(Delivery).where(col(Delivery.key).is_not(None)).order_by(col(Delivery.id))
        if kind is not None:
            q = q.where(Delivery.kind == kind)
        rows = list((await s.exec(q)).all())
    return [r for r in rows if where is None or where(r)]
