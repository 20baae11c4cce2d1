"""The message path stays lean (#22): a turn indexes its own message and nothing else, a
greeting waits for the background batch for its vector, and a long backlog of unindexed
history costs the turn nothing (the background pass takes it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import event
from sqlmodel import select

from bot.app.build import App
from storage.models import MemoryItem
from storage.repos.memory_index import MemoryIndexRepo
from storage.repos.messages import MessageRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, say
from tests.support.app import AppFactory, add_user
from tests.support.builders import make_inbound


async def _vector_of(app: App, message_id: int) -> bytes | None:
    async with app.db.session() as s:
        item = await MemoryIndexRepo(s).by_source("message", message_id)
    assert item is not None, "the message was not indexed by its turn"
    return item.embedding


async def _indexed_messages(app: App) -> int:
    async with app.db.session() as s:
        rows = await s.exec(select(MemoryItem).where(MemoryItem.kind == "message"))
        return len(rows.all())


async def test_a_sentence_gets_its_vector_a_greeting_waits_for_the_batch(
    app: App, fake_llm: FakeLLM
) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    # The router may or may not ask the model to classify the second message (its rules
    # know weekday names): answer a classification as chat, anything else plainly.
    fake_llm.default = lambda body: (
        say('{"route": "chat"}')
        if "Classify the user's message" in str(body["messages"][0]["content"])
        else say("Noted.")
    )
    hi = await app.dispatcher.handle(make_inbound("hi"))
    assert hi.turn is not None
    hi_id = hi.turn.inbound_id
    said = await app.dispatcher.handle(make_inbound("I booked the dentist for Tuesday morning"))
    assert said.turn is not None
    await app.memory.drain()

    assert await _vector_of(app, said.turn.inbound_id) is not None
    assert await _vector_of(app, hi_id) is None  # indexed (full text), no model call for it
    found = await app.memory.retriever.search(
        user.id, "dentist", now=datetime.now(UTC), tz=ZoneInfo("UTC"), limit=5, kinds=("message",)
    )
    assert [e.item.source_id for e in found.evidence] == [said.turn.inbound_id]

    await app.memory.index_pending()  # what the background pass runs: it embeds the rest
    assert await _vector_of(app, hi_id) is not None


async def test_a_backlog_of_unindexed_history_costs_the_turn_nothing(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    # Extraction (every N lines) is not what this test is about: N is set out of reach.
    app = await app_factory(fake_llm, extraction_every_messages=10_000)
    app.dispatcher.register(RecordingChannel("fake"))
    user = await add_user(app, "u1")
    assert user.id is not None
    fake_llm.add(say("Hello!"), say("Hello again!"))
    first = await app.dispatcher.handle(make_inbound("hi"))
    assert first.turn is not None
    conv = first.turn.conversation_id
    await app.memory.drain()

    statements: list[str] = []

    def count(_conn: object, _cur: object, sql: str, *_rest: object) -> None:
        statements.append(sql)

    # 600 messages stored by another path (as an import or a transcript would) and not
    # indexed yet: the old hook indexed all of them inside the next person's turn.
    old = datetime.now(UTC) - timedelta(days=30)
    async with app.db.session() as s:
        await MessageRepo(s).add_new_rows(
            [
                {
                    "user_id": user.id,
                    "conversation_id": conv,
                    "direction": "in",
                    "role": "user",
                    "channel": "fake",
                    "account": "acct",
                    "chat_id": "u1",
                    "text": f"old note number {n} about the garden",
                    "status": "answered",
                    "dedupe_key": f"test:backlog:{n}",
                    "created_at": old + timedelta(minutes=n),
                }
                for n in range(600)
            ]
        )
    engine = app.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        second = await app.dispatcher.handle(make_inbound("hi"))
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert second.status == "answered"
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO MEMORYITEM")]
    assert len(inserts) == 1  # the turn's own message only
    assert await _indexed_messages(app) == 2  # the two greetings
    await app.memory.index_pending()  # what the background pass runs: it takes the backlog
    await app.memory.drain()
    assert await _indexed_messages(app) == 602


GREETING_STATEMENTS = 13
"""SQL statements one greeting costs, hooks included (#22, #28): the identity, user and
conversation in one read, the message stored with them, the open question and the turn's
reads in one unit of work under the lock, its writes (thread summary, memory index row,
status, reply) in one commit, the receipt."""
GREETING_COMMITS = 4
"""Units of work one greeting costs, hooks included."""


class _Statements:
    """Every SQL statement and commit on the engine while counting."""

    def __init__(self, app: App) -> None:
        self.engine = app.db.engine.sync_engine
        self.sql: list[str] = []
        self.commits = 0

    def _statement(self, _conn: object, _cur: object, sql: str, *_rest: object) -> None:
        self.sql.append(" ".join(sql.split())[:100])

    def _commit(self, _conn: object) -> None:
        self.commits += 1

    async def of(self, app: App, text: str) -> None:
        """Count one message from u1, its hooks included."""
        self.sql, self.commits = [], 0
        event.listen(self.engine, "before_cursor_execute", self._statement)
        event.listen(self.engine, "commit", self._commit)
        try:
            result = await app.dispatcher.handle(make_inbound(text))
            await app.memory.drain()
        finally:
            event.remove(self.engine, "before_cursor_execute", self._statement)
            event.remove(self.engine, "commit", self._commit)
        assert result.status == "answered", result


async def test_a_greeting_costs_a_fixed_number_of_statements_however_long_the_history(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    # Extraction (every N lines) runs apart from the person's turn: N is set out of reach.
    app = await app_factory(fake_llm, extraction_every_messages=10_000)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app, "u1")
    fake_llm.default = lambda _body: say("Hello!")
    for _ in range(15):  # the thread has outgrown the history window: it has a summary
        await app.dispatcher.handle(make_inbound("hi"))
    await app.memory.drain()
    counted = _Statements(app)

    async def three_greetings() -> list[str]:
        # Three turns push six rows out of the window: the summary takes them in once.
        sql: list[str] = []
        for _ in range(3):
            await counted.of(app, "hi")
            assert len(counted.sql) <= GREETING_STATEMENTS, "\n".join(counted.sql)
            assert counted.commits <= GREETING_COMMITS, counted.commits
            sql += counted.sql
        return sql

    short_history = await three_greetings()
    summary_writes = [q for q in short_history if q.startswith("UPDATE conversation SET title")]
    assert len(summary_writes) == 1, "\n".join(short_history)

    for _ in range(60):  # longer than the window and the summary span together
        await app.dispatcher.handle(make_inbound("hi"))
    await app.memory.drain()
    long_history = await three_greetings()
    assert len(long_history) == len(short_history), "\n".join(long_history)


async def test_remembering_a_fact_embeds_that_fact_and_leaves_the_backlog_to_the_pass(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    # The old path embedded every item of the user's without a vector after each fact: a
    # scan of the whole history inside the person's turn (#22).
    app = await app_factory(fake_llm, extraction_every_messages=10_000)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app, "u1")
    fake_llm.default = lambda _body: say("Hello!")
    greetings = []
    for _ in range(3):  # greetings wait for the background pass for their vectors
        hi = await app.dispatcher.handle(make_inbound("hi"))
        assert hi.turn is not None
        greetings.append(hi.turn.inbound_id)
    await app.memory.drain()

    said = await app.dispatcher.handle(make_inbound("remember my locker code is 4521"))
    assert said.reply is not None and "4521" in said.reply
    async with app.db.session() as s:
        rows = await s.exec(select(MemoryItem).where(MemoryItem.kind == "fact"))
        fact = rows.one()
    assert fact.embedding is not None  # searchable by meaning at once
    assert [await _vector_of(app, m) for m in greetings] == [None, None, None]

    await app.memory.index_pending()  # what the background pass runs
    assert all([await _vector_of(app, m) for m in greetings])


async def test_extraction_in_a_busy_chat_runs_once_per_n_messages(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    # Extraction (every 20 lines, in the background) used to go round again for the lines
    # said while it ran, so a busy chat was extracted every few messages (#22).
    app = await app_factory(fake_llm, extraction_every_messages=20)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app, "u1")
    fake_llm.default = lambda _body: say("Hello!")
    engine = app.db.engine.sync_engine
    statements: list[str] = []

    def count(_conn: object, _cur: object, sql: str, *_rest: object) -> None:
        statements.append(sql)

    event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(80):
            await app.dispatcher.handle(make_inbound("hi"))
        await app.memory.drain()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    cursor_moves = [s for s in statements if "memorycursor" in s and "INSERT" in s.upper()]
    # 160 lines (80 greetings and their answers), one extraction per 20 turns or fewer.
    assert len(cursor_moves) <= 80 // 20, len(cursor_moves)
    assert len(statements) / 80 <= GREETING_STATEMENTS + 2
