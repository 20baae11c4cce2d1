"""Storage behaviour on SQLite and PostgreSQL: migrations, dedupe, user scoping."""

from __future__ import annotations

from sqlmodel import select

from bot.app.build import App
from storage.models import Message
from storage.repos.facts import FactRepo
from storage.repos.tasks import TaskRepo
from tests.fakes.llm import FakeLLM, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound


async def test_dedupe_key_holds_in_the_database(any_db_app: App, fake_llm: FakeLLM) -> None:
    await add_user(any_db_app)
    fake_llm.add(say("hey!"))
    for _ in range(3):
        await any_db_app.dispatcher.handle(make_inbound("hello", message_id="same-id"))
    async with any_db_app.db.session() as s:
        inbound = (await s.exec(select(Message).where(Message.direction == "in"))).all()
    assert len(inbound) == 1
    assert channel(any_db_app).texts() == ["hey!"]


async def test_migrations_apply_twice_without_harm(any_db_app: App) -> None:
    await any_db_app.db.migrate()
    await any_db_app.db.migrate()
    await any_db_app.db.ping()


async def test_repositories_are_scoped_by_user(any_db_app: App) -> None:
    a = await add_user(any_db_app, "a")
    b = await add_user(any_db_app, "b")
    assert a.id is not None and b.id is not None
    async with any_db_app.db.session() as s:
        fact, _ = await FactRepo(s).add(a.id, "likes green tea", "preferences")
        task = await TaskRepo(s).add(a.id, "call the dentist")
    async with any_db_app.db.session() as s:
        assert await FactRepo(s).active(b.id) == []
        assert await FactRepo(s).forget(b.id, fact.id or 0) is None
        assert await TaskRepo(s).list(b.id) == []
        assert await TaskRepo(s).complete(b.id, task.id or 0, task.created_at) is None
        assert [f.text for f in await FactRepo(s).active(a.id)] == ["likes green tea"]


async def test_exact_repeat_of_a_fact_is_stored_once(any_db_app: App) -> None:
    user = await add_user(any_db_app)
    assert user.id is not None
    async with any_db_app.db.session() as s:
        _, first = await FactRepo(s).add(user.id, "My sister is Ana.")
        _, second = await FactRepo(s).add(user.id, "my sister is  ana")
    assert (first, second) == (True, False)


async def test_a_database_with_data_upgrades_through_every_migration(
    tmp_path, postgres_or_sqlite_url: str
) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import text

    from storage.db import Database

    db = Database(postgres_or_sqlite_url)
    await db.migrate("0001")  # as a first release left it
    now = datetime(2026, 1, 1, tzinfo=UTC)
    async with db.engine.begin() as conn:
        await conn.execute(
            text(
                'INSERT INTO "user" (id, display_name, is_owner, timezone, created_at) '
                "VALUES (1, 'ana', true, 'Europe/Lisbon', :now)"
            ),
            {"now": now},
        )
        await conn.execute(
            text(
                "INSERT INTO channelidentity (id, user_id, channel, account, sender_id, created_at)"
                " VALUES (1, 1, 'telegram', 'bot', '42', :now)"
            ),
            {"now": now},
        )
    await db.migrate()
    async with db.session() as s:
        from storage.repos.users import UserRepo

        user = await UserRepo(s).get(1)
        [ident] = await UserRepo(s).identities(1)
    await db.dispose()
    assert user is not None
    assert (user.display_name, user.timezone, user.briefing_enabled) == (
        "ana",
        "Europe/Lisbon",
        True,
    )
    assert (ident.channel, ident.sender_id) == ("telegram", "42")
