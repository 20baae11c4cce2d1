"""The per-message path stays lean: bounded SQL per greeting, one trip per statement (#28)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError

from bot.app.build import App
from storage.db import Database
from tests.fakes.llm import FakeLLM, Step
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound

GREETING_STATEMENTS = 10
"""SQL statements one greeting takes today: store with identity, conversation and whether a
question of ours waits (3), the agent's context (2, the conversation as the store read it; the
answer check only when a question waits; the order check and 3 reads when another message of
the chat is on its way, or on PostgreSQL), the stored turn, its reply and the message's index
row (3; the thread summary's update once older rows leave the window), the receipt (2). Memory
extraction every N turns comes on top."""
GREETING_COMMITS = 3
"""Units of work per greeting on SQLite: the message stored with the answer check and the
agent's context (read together when no other message of the chat is on its way), the turn
with its reply and index row, the receipt. (Four with the checks in a unit of their own.)"""


class Tally:
    """Statements and commits on an engine since the last ``reset``."""

    def __init__(self, db: Database) -> None:
        self.statements: list[str] = []
        self.commits = 0
        event.listen(db.engine.sync_engine, "before_cursor_execute", self._statement)
        event.listen(db.engine.sync_engine, "commit", self._commit)

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        self.statements.append(statement.split("\n", 1)[0][:80])

    def _commit(self, *_args: Any) -> None:
        self.commits += 1

    def reset(self) -> None:
        """Count afresh."""
        self.statements, self.commits = [], 0


async def test_a_greeting_costs_a_bounded_number_of_statements_and_commits(
    app: App, fake_llm: FakeLLM
) -> None:
    fake_llm.default = lambda _body: Step(text="Hello!")
    await add_user(app)
    await app.dispatcher.handle(make_inbound("hi", message_id="first"))  # the conversation
    tally = Tally(app.db)

    for n in range(3):
        tally.reset()
        result = await app.dispatcher.handle(make_inbound("hi", message_id=f"m{n}"))
        assert result.status == "answered"
        # A new statement on every message's path must say why here (and in the bench).
        assert len(tally.statements) <= GREETING_STATEMENTS, tally.statements
        assert tally.commits <= GREETING_COMMITS
    assert channel(app).texts() == ["Hello!"] * 4


async def test_one_trip_sqlite_keeps_rows_errors_rollbacks_and_streams(tmp_path: Any) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    try:
        async with db.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)"))
            await conn.execute(text("INSERT INTO t VALUES ('a', 1), ('b', 2)"))
        async with db.engine.connect() as conn:
            updated = await conn.execute(text("UPDATE t SET v = v + 1"))
            assert updated.rowcount == 2
            await conn.rollback()  # the update is undone: the adapter knew it was open
            rows = (await conn.execute(text("SELECT k, v FROM t ORDER BY k"))).all()
            assert [tuple(r) for r in rows] == [("a", 1), ("b", 2)]
            back = await conn.execute(text("INSERT INTO t VALUES ('c', 3) RETURNING v"))
            assert back.scalar_one() == 3
            await conn.commit()
            streamed = await conn.stream(text("SELECT v FROM t ORDER BY v"))
            assert [r[0] async for r in streamed] == [1, 2, 3]
        async with db.engine.connect() as conn:
            await conn.execute(text("INSERT INTO t VALUES ('d', 4)"))
            with pytest.raises(IntegrityError):
                await conn.execute(text("INSERT INTO t VALUES ('a', 9)"))
            await conn.rollback()
        async with db.engine.connect() as conn:  # the failed unit left nothing behind
            rows = (await conn.execute(text("SELECT k, v FROM t ORDER BY k"))).all()
            assert [tuple(r) for r in rows] == [("a", 1), ("b", 2), ("c", 3)]
    finally:
        await db.engine.dispose()
