"""The turn hook's index row, made in the database in one statement (issue 28).

What search shows for a message (who said it, its reference, its time, its words) must be the
same row the Python-side ``message_row`` makes for it, for every shape of a message's meta
(a device transcript's speaker, an import's id, a sender's name, overheard speech), on SQLite
and PostgreSQL; what is not memory (replies, commands, empty text) stays out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import col, select

from bot.agent.memory.index import message_row
from bot.app.build import App
from storage.models import Conversation, MemoryItem, Message
from tests.support.app import add_user

METAS: list[tuple[str, dict[str, Any] | None, str | None]] = [
    ("fake", None, "m1"),
    ("fake", {"overheard": True}, "m2"),
    ("device", {"speaker": "Ana"}, None),
    ("device", None, ""),
    ("fake", {"sender_name": "Bob Silva"}, "m5"),
    ("fake", {"speaker": "", "sender_name": "Bob"}, "m6"),
    ("import", {"import_id": "chat-7#12", "speaker": "Carla"}, "x"),
    ("import", {"import_id": 4512}, None),
]


async def test_turn_index_rows_match_message_rows(any_db_app: App) -> None:
    app = any_db_app
    user = await add_user(app)
    assert user.id is not None
    start = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    async with app.db.session() as s:
        conv = Conversation(user_id=user.id, channel="fake", account="acct", chat_id="u1")
        s.add(conv)
        await s.flush()
        rows = [
            Message(
                user_id=user.id,
                conversation_id=conv.id,
                direction="in",
                role="user",
                channel=channel,
                chat_id="u1",
                external_id=external,
                text=f"lunch with the team at the harbour number {n}",
                status="received",
                meta=meta,
                created_at=start + timedelta(minutes=n),
            )
            for n, (channel, meta, external) in enumerate(METAS)
        ]
        # Not memory: lifebot's reply, a command, an empty message.
        rows += [
            Message(user_id=user.id, conversation_id=conv.id, direction="out", role="assistant",
                    channel="fake", text="a reply", status="sent", created_at=start),
            Message(user_id=user.id, conversation_id=conv.id, direction="in", role="user",
                    channel="fake", text="/help", status="answered", created_at=start),
            Message(user_id=user.id, conversation_id=conv.id, direction="in", role="user",
                    channel="fake", text="", status="answered", created_at=start),
        ]  # fmt: skip
        s.add_all(rows)
        await s.flush()
        ids = [m.id or 0 for m in rows]
        expected = {m.id or 0: message_row(m) for m in rows[: len(METAS)]}

    todo = await app.memory.index.index_messages(user.id, ids)
    again = await app.memory.index.index_messages(user.id, ids)  # already indexed: nothing

    async with app.db.session() as s:
        items = (await s.exec(select(MemoryItem).where(col(MemoryItem.user_id) == user.id))).all()
    got = {i.source_id: i for i in items if i.kind == "message"}
    assert set(got) == set(expected)
    for source_id, want in expected.items():
        item = got[source_id]
        for key in ("conversation_id", "channel", "speaker", "ref", "text", "hidden"):
            assert getattr(item, key) == want[key], (source_id, key)
        assert item.ts == want["ts"]
        assert item.ts_end is None
    speakers = {i.source_id: i.speaker for i in items}
    assert speakers[ids[2]] == "Ana" and speakers[ids[3]] == "ambient"
    assert speakers[ids[4]] == "Bob Silva" and speakers[ids[5]] == "Bob"
    refs = {i.source_id: i.ref for i in items}
    assert refs[ids[0]] == "m1" and refs[ids[3]] == str(ids[3])
    assert refs[ids[6]] == "chat-7#12" and refs[ids[7]] == "4512"
    # Each new row is handed on to be embedded, another person's words with their name.
    embed = {item_id: text for item_id, _, text in todo}
    assert len(embed) == len(METAS)
    assert embed[got[ids[2]].id or 0].startswith("Ana: lunch")
    assert embed[got[ids[0]].id or 0].startswith("lunch")
    assert again == []
