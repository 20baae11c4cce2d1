"""Which album items a process takes over (``bot.adapters.telegram.inbox``), on both databases.

Each item names the process holding it; a holder is gone once its heartbeat row
(``lifebotprocess``) says it stopped or has not been seen for ``silent_after`` seconds. Items
of a holder gone are taken over at once; the rest after ``ORPHANED`` seconds, as before.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlmodel import select
from telegram import Bot, Chat, Message

from bot.adapters.telegram.config import AlbumHolder
from bot.adapters.telegram.inbox import ORPHANED, AlbumInbox
from bot.app.build import App
from storage.models import InboxItem, LifebotProcess
from tests.fakes.clock import ManualClock
from tests.fakes.telegram_api import TOKEN

SILENT = 10.0
START = datetime(2026, 3, 1, 12, tzinfo=UTC)


def item(n: int, group: str = "7") -> Message:
    chat = Chat(id=42, type="private")
    return Message(message_id=n, date=START, chat=chat, media_group_id=group)


async def beat(app: App, process_id: str, at: datetime, *, stopped: bool = False) -> None:
    """Write ``process_id``'s heartbeat row as last seen ``at``."""
    async with app.db.session() as s:
        row = await s.get(LifebotProcess, process_id)
        if row is None:
            row = LifebotProcess(id=process_id, host="h", pid=1, started_at=at, last_seen_at=at)
        row.last_seen_at = at
        row.stopped_at = at if stopped else None
        s.add(row)


def inbox(app: App, clock: ManualClock, process_id: str | None) -> AlbumInbox:
    holder = None if process_id is None else AlbumHolder(process_id, silent_after=SILENT)
    return AlbumInbox(app.db, "bot", Bot(TOKEN), clock, holder)


async def holders(app: App) -> list[str | None]:
    async with app.db.session() as s:
        return list((await s.exec(select(InboxItem.taken_by).order_by(InboxItem.id))).all())  # type: ignore[arg-type]


async def test_items_of_a_live_holder_stay_with_it_and_a_silent_one_loses_them_at_once(
    any_db_app: App,
) -> None:
    clock = ManualClock(START)
    a, b = inbox(any_db_app, clock, "a"), inbox(any_db_app, clock, "b")
    await beat(any_db_app, "a", START)
    for n in (1, 2):
        await a.keep(item(n))
    assert await holders(any_db_app) == ["a", "a"]

    clock.advance(seconds=SILENT - 1)
    assert await b.left(starting=False) == []  # "a" was seen lately: it is handling them
    await beat(any_db_app, "a", clock.now())
    clock.advance(seconds=SILENT - 1)
    assert await b.left(starting=False) == []  # it beats on

    clock.advance(seconds=2)  # "a" silent for longer than SILENT: killed, or frozen
    assert [m.message_id for m in await b.left(starting=False)] == [1, 2]
    assert await holders(any_db_app) == ["b", "b"]
    assert await a.left(starting=False) == []  # "b" has no heartbeat row yet: not taken


async def test_items_of_a_stopped_holder_are_taken_over_at_once(any_db_app: App) -> None:
    clock = ManualClock(START)
    a, b = inbox(any_db_app, clock, "a"), inbox(any_db_app, clock, "b")
    await beat(any_db_app, "a", START)
    await a.keep(item(1))
    await beat(any_db_app, "a", START, stopped=True)
    assert [m.message_id for m in await b.left(starting=False)] == [1]


async def test_without_heartbeat_news_of_the_holder_items_wait_the_minute(
    any_db_app: App,
) -> None:
    """No holder named (a process without a heartbeat), or one without a heartbeat row (not
    written yet, or gone): the minute since the item was taken on, as before."""
    clock = ManualClock(START)
    nobody, ghost, b = (inbox(any_db_app, clock, p) for p in (None, "ghost", "b"))
    await nobody.keep(item(1, "7"))
    await ghost.keep(item(2, "8"))
    clock.advance(seconds=ORPHANED - 1)
    assert await b.left(starting=False) == []
    clock.advance(seconds=2)
    assert [m.message_id for m in await b.left(starting=False)] == [1, 2]


async def test_a_process_never_takes_over_its_own_items_before_the_minute(
    any_db_app: App,
) -> None:
    """Its own heartbeat late (the database was slow): its items are in its own hands."""
    clock = ManualClock(START)
    a = inbox(any_db_app, clock, "a")
    await beat(any_db_app, "a", START)
    await a.keep(item(1))
    clock.advance(seconds=SILENT * 2)
    assert await a.left(starting=False) == []
    clock.advance(seconds=ORPHANED)  # never let go of (a failed forget): taken on again
    assert [m.message_id for m in await a.left(starting=False)] == [1]
