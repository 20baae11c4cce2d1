"""Storage behaviour on SQLite and PostgreSQL: migrations, dedupe, user scoping."""

from __future__ import annotations

import pytest
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

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


async def test_facts_stored_twice_by_a_race_are_settled_by_the_upgrade(
    postgres_or_sqlite_url: str,
) -> None:
    """Twins of a live fact (concurrent adds made them) become replaced by the oldest.

    The upgrade then makes one live fact per user and words a unique index: a second insert
    of the same live words is refused by the database itself.
    """
    from datetime import UTC, datetime

    from sqlalchemy.exc import IntegrityError
    from sqlmodel import select

    from storage.db import Database
    from storage.models import Fact, MemoryItem, User
    from storage.repos.facts import fact_hash

    db = Database(postgres_or_sqlite_url)
    try:
        await db.migrate("0021_server_key")
        now = datetime(2026, 1, 1, tzinfo=UTC)
        h = fact_hash("I live in Porto")
        async with db.session() as s:
            s.add(User(id=1, display_name="ana"))
            await s.flush()
            for n in range(1, 5):  # 1-3 live twins; 4 the same words, forgotten
                gone = now if n == 4 else None
                s.add(Fact(id=n, user_id=1, text="I live in Porto", text_hash=h, forgotten_at=gone))
                s.add(MemoryItem(user_id=1, kind="fact", source_id=n, ts=now, text="Porto"))
            s.add(Fact(id=5, user_id=1, text="I like tea", text_hash=fact_hash("I like tea")))
            s.add(MemoryItem(user_id=1, kind="fact", source_id=5, ts=now, text="tea"))
        await db.migrate()
        async with db.session() as s:
            facts = (await s.exec(select(Fact).order_by(Fact.id))).all()  # type: ignore[arg-type]
            indexed = (await s.exec(select(MemoryItem.source_id))).all()
        assert [(f.id, f.superseded_by) for f in facts] == [
            (1, None), (2, 1), (3, 1), (4, None), (5, None)
        ]  # fmt: skip
        assert sorted(indexed) == [1, 4, 5]
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                s.add(Fact(user_id=1, text="i live in porto.", text_hash=h))
    finally:
        await db.dispose()


async def test_calendars_linked_twice_by_a_race_are_merged_by_the_upgrade(
    postgres_or_sqlite_url: str,
) -> None:
    """Copies of a linked calendar (concurrent subscribes made them) merge into the oldest.

    Each copy's events showed beside the oldest's: those the oldest has go (a proposal merged
    into one now points at the oldest's), the others move to it. Then one calendar per user,
    kind and address is a unique index: linking it again is refused by the database itself.
    """
    from datetime import UTC, datetime, timedelta

    from sqlalchemy.exc import IntegrityError
    from sqlmodel import col, select

    from storage.db import Database
    from storage.models import CalendarEvent, CalendarSource, Proposal, User

    db = Database(postgres_or_sqlite_url)
    feed, other = "https://cal.example.test/a.ics", "https://cal.example.test/b.ics"
    at = datetime(2026, 1, 1, 9, tzinfo=UTC)
    try:
        await db.migrate("0023_fact_once")
        async with db.session() as s:
            s.add_all([User(id=1, display_name="ana"), User(id=2, display_name="bo")])
            await s.flush()
            for sid, user, kind, url in [
                (1, 1, "ics", feed),
                (2, 1, "ics", feed),  # a copy
                (3, 1, "ics", other),
                (4, 1, "caldav", feed),  # another kind: not a copy
                (5, 2, "ics", feed),  # another person's
                (6, 1, "ics", feed),  # a second copy
            ]:
                s.add(CalendarSource(id=sid, user_id=user, kind=kind, name="c", url=url))
            await s.flush()
            for eid, source, uid, title, hours in [
                (1, "ics:1", "1/ics:1/aa@ics.lifebot", "standup", 0),
                (2, "ics:1", "1/ics:1/bb@ics.lifebot", "lunch", 3),
                (3, "ics:2", "1/ics:2/aa@ics.lifebot", "standup", 0),  # the oldest has it
                (4, "ics:2", "1/ics:2/cc@ics.lifebot", "review", 6),  # only the copy has it
                (5, "ics:2", "9f3e@ics.lifebot", "lunch", 3),  # an older uid; by its time
                (6, "ics:6", "1/ics:6/aa@ics.lifebot", "standup", 0),
                (7, "caldav:4", "1/caldav:4/aa@caldav.lifebot", "standup", 0),
            ]:
                start = at + timedelta(hours=hours)
                s.add(
                    CalendarEvent(
                        id=eid, user_id=1, uid=uid, title=title, title_key=title,
                        start_at=start, end_at=start + timedelta(hours=1), source=source,
                    )
                )  # fmt: skip
            await s.flush()
            s.add(
                Proposal(
                    id=1, user_id=1, title="standup", start_at=at, end_at=at, status="accepted",
                    event_id=3, expires_at=at,
                )
            )  # fmt: skip
        await db.migrate()
        async with db.session() as s:
            sources = (await s.exec(select(CalendarSource).order_by(col(CalendarSource.id)))).all()
            events = (await s.exec(select(CalendarEvent).order_by(col(CalendarEvent.id)))).all()
            proposal = await s.get(Proposal, 1)
        assert [c.id for c in sources] == [1, 3, 4, 5]
        assert [(e.id, e.source, e.uid) for e in events] == [
            (1, "ics:1", "1/ics:1/aa@ics.lifebot"),
            (2, "ics:1", "1/ics:1/bb@ics.lifebot"),
            (4, "ics:1", "1/ics:1/cc@ics.lifebot"),
            (7, "caldav:4", "1/caldav:4/aa@caldav.lifebot"),
        ]
        assert proposal is not None and proposal.event_id == 1
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                s.add(CalendarSource(user_id=1, kind="ics", name="again", url=feed))
    finally:
        await db.dispose()


async def _old_contacts(s: AsyncSession, rows: list[tuple[int, int, str, str, str, str]]) -> None:
    """Contacts as an older schema stores them (the model has columns it lacks)."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    conn = await s.connection()
    for cid, user, name, aliases, relationship, reach in rows:
        await conn.execute(
            text(
                "INSERT INTO contact (id, user_id, name, aliases, relationship, reach, created_at) "
                "VALUES (:id, :user, :name, :aliases, :relationship, :reach, :at)"
            ),
            {
                "id": cid, "user": user, "name": name, "aliases": aliases,
                "relationship": relationship, "reach": reach,
                "at": datetime(2026, 1, 1, tzinfo=UTC),
            },
        )  # fmt: skip


async def test_contacts_stored_twice_in_different_cases_are_merged_by_the_upgrade(
    postgres_or_sqlite_url: str,
) -> None:
    """Twins of a contact ("Anna" and "anna", made by requests at once) merge into the oldest.

    Every "Anna" fitted both; the oldest keeps its spelling and gains what only a twin knew
    (other names, a relationship, how to reach her), a way of reaching her from each. Then one
    contact per user and name in any case is a unique index: the database refuses another.
    """
    from sqlalchemy.exc import IntegrityError
    from sqlmodel import col, select

    from storage.db import Database
    from storage.models import Contact, User

    db = Database(postgres_or_sqlite_url)
    try:
        await db.migrate("0024_calendar_once")
        async with db.session() as s:
            s.add_all([User(id=1, display_name="ana"), User(id=2, display_name="bo")])
            await s.flush()
            await _old_contacts(
                s,
                [
                    (1, 1, "Anna", "Ann", "", ""),
                    (2, 1, "anna", "annie, ANN", "sister", "anna@example.org"),
                    (3, 1, "ANNA", "", "friend", "+351 900 000 000"),
                    (4, 1, "Bo", "", "", ""),
                    (5, 2, "anna", "", "", ""),  # another person's
                ],
            )
        await db.migrate()
        async with db.session() as s:
            contacts = (await s.exec(select(Contact).order_by(col(Contact.id)))).all()
        assert [(c.id, c.name) for c in contacts] == [(1, "Anna"), (4, "Bo"), (5, "anna")]
        anna = contacts[0]
        assert (anna.aliases, anna.relationship, anna.reach) == (
            "Ann, annie",
            "sister; friend",
            "anna@example.org; +351 900 000 000",
        )
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                s.add(Contact(user_id=1, name="aNNa"))
    finally:
        await db.dispose()


async def test_a_contact_is_one_per_user_and_name_however_it_is_written(any_db_app: App) -> None:
    """Ângela, ÂNGELA and Ângela with its accent typed as a separate mark are one name.

    Every lookup matched them as one (bar the separate mark), but SQLite's lower() folds only
    ASCII: its unique (user, lower(name)) let a second Ângela in. The name's key (folded in
    Python, the same on both databases) is what lookups match and the database keeps unique.
    """
    from sqlalchemy.exc import IntegrityError

    from storage.models import Contact
    from storage.repos.people import ContactRepo

    user = await add_user(any_db_app)
    assert user.id is not None
    async with any_db_app.db.session() as s:
        repo = ContactRepo(s)
        first, made = await repo.put(user.id, "Ângela", relationship="sister")
        assert made
        for spelling in ("ângela", "ÂNGELA", "A\u0302ngela", "a\u0302NGELA", "Ângela  "):
            again, made = await repo.put(user.id, spelling, reach=f"{spelling}@x.org")
            assert (again.id, made) == (first.id, False), spelling
        bo = await repo.add(user.id, "Bo")
        assert bo.id is not None
        with pytest.raises(ValueError, match="already have a contact called Ângela"):
            await repo.change(user.id, bo.id, name="a\u0302NGELA")
    with pytest.raises(IntegrityError):  # the database refuses a twin written past the repo
        async with any_db_app.db.session() as s:
            s.add(Contact(user_id=user.id, name="ângela"))
    async with any_db_app.db.session() as s:
        listed = await ContactRepo(s).every(user.id)
    assert sorted((c.name, c.relationship) for c in listed) == [("Bo", ""), ("Ângela", "sister")]


async def test_contacts_the_name_key_finds_twice_are_merged_by_the_upgrade(
    postgres_or_sqlite_url: str,
) -> None:
    """Twins lower() did not fold (SQLite: any non-ASCII letter; both: an accent typed as a
    separate mark) merge into the oldest as 0025 merged "Anna" and "anna"; every contact
    gets its name's key, and one contact per user and key is a unique index."""
    from sqlalchemy.exc import IntegrityError
    from sqlmodel import col, select

    from storage.db import Database
    from storage.models import Contact, User

    db = Database(postgres_or_sqlite_url)
    sqlite = postgres_or_sqlite_url.startswith("sqlite")
    try:
        await db.migrate("0027_album_inbox")
        async with db.session() as s:
            s.add_all([User(id=1, display_name="ana"), User(id=2, display_name="bo")])
            await s.flush()
            rows = [
                (1, 1, "Ângela", "Angie", "", ""),
                (2, 1, "A\u0302NGELA", "angie, Gela", "sister", "angela@example.org"),
                (4, 1, "Bo", "", "", ""),
                (5, 2, "ângela", "", "", ""),  # another person's
            ]
            if sqlite:  # PostgreSQL's lower() folded these: 0025 refused the second
                rows.append((3, 1, "ângela", "", "friend", "+351 900 000 000"))
            await _old_contacts(s, rows)
        await db.migrate()
        async with db.session() as s:
            contacts = (await s.exec(select(Contact).order_by(col(Contact.id)))).all()
        assert [(c.id, c.name, c.name_key) for c in contacts] == [
            (1, "Ângela", "ângela"), (4, "Bo", "bo"), (5, "ângela", "ângela")
        ]  # fmt: skip
        angela = contacts[0]
        assert (angela.aliases, angela.relationship, angela.reach) == (
            "Angie, Gela",
            "sister; friend" if sqlite else "sister",
            "angela@example.org; +351 900 000 000" if sqlite else "angela@example.org",
        )
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                s.add(Contact(user_id=1, name="ângela"))
    finally:
        await db.dispose()


def _long_address(seed: int) -> str:
    """A calendar address of ~4 kB that does not compress (PostgreSQL's index rows are ~2.7 kB)."""
    import random

    rng = random.Random(seed)
    return "https://cal.example.test/" + "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(4000)
    )


async def test_a_database_holding_a_very_long_calendar_address_upgrades_and_links_more(
    postgres_or_sqlite_url: str,
) -> None:
    """A calendar address longer than a PostgreSQL index row (a CalDAV server's collection
    path, a feed linked before addresses were capped) stopped the upgrade: the unique index
    on the address could not be built, and once built a new such address answered 500. The
    address is now indexed by its hash there: the upgrade runs, long addresses link, and the
    same one twice is still refused by the database."""
    from sqlalchemy.exc import IntegrityError

    from storage.db import Database
    from storage.models import CalendarSource, User
    from storage.repos.calendar_sources import CalendarSourceRepo

    db = Database(postgres_or_sqlite_url)
    first, second = _long_address(1), _long_address(2)
    try:
        await db.migrate("0023_fact_once")
        async with db.session() as s:
            s.add(User(id=1, display_name="ana"))
            await s.flush()
            work = CalendarSource(user_id=1, kind="caldav", name="work", url=first)
            s.add(work)
        await db.migrate()
        async with db.session() as s:
            _, new = await CalendarSourceRepo(s).add(
                CalendarSource(user_id=1, kind="caldav", name="home", url=second)
            )
            again, twice = await CalendarSourceRepo(s).add(
                CalendarSource(user_id=1, kind="caldav", name="work again", url=first)
            )
        assert (new, twice, again.id) == (True, False, work.id)
        with pytest.raises(IntegrityError):
            async with db.session() as s:
                s.add(CalendarSource(user_id=1, kind="caldav", name="copy", url=second))
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_on_postgres_a_database_the_first_0024_upgraded_gets_the_hashed_index(
    postgres_url: str,
) -> None:
    """The first form of 0024 indexed the address itself; 0026 rebuilds that index by hash, so
    a database it upgraded links a long address afterwards instead of answering 500."""
    from sqlalchemy import text

    from storage.db import Database
    from storage.models import CalendarSource, User
    from storage.repos.calendar_sources import CalendarSourceRepo

    db = Database(postgres_url)
    try:
        await db.migrate("0025_contact_once")
        async with db.engine.begin() as conn:  # what the first form of 0024 left
            await conn.execute(text("DROP INDEX ux_calendarsource_user_url"))
            await conn.execute(
                text(
                    "CREATE UNIQUE INDEX ux_calendarsource_user_url "
                    "ON calendarsource (user_id, kind, url)"
                )
            )
        await db.migrate()
        async with db.session() as s:
            s.add(User(id=1, display_name="ana"))
            await s.flush()
            _, new = await CalendarSourceRepo(s).add(
                CalendarSource(user_id=1, kind="caldav", name="home", url=_long_address(2))
            )
        assert new
    finally:
        await db.dispose()
