"""The journal as a user meets it: /journal, "journal: ...", voice notes, folder import, scores
and memory search citing entries."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlmodel import select

from bot.agent.journal.scoring import LexiconScorer
from bot.messages import Attachment
from storage.models import JournalEntry
from storage.repos.journal import JournalRepo
from tests.fakes.llm import FakeLLM
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound

SCORES = {
    "happiness": 72,
    "stress": 20,
    "energy": 64,
    "themes": ["friends"],
    "people": ["Ana"],
    "reason": "a calm day with a friend",
}


def fixed_scores(fake: FakeLLM, scores: dict[str, object] | None = None) -> None:
    def respond(body):
        assert "rate one personal journal entry" in body["messages"][0]["content"]
        assert body["model"] == "fake-fast" and body["response_format"] == {"type": "json_object"}
        from tests.fakes.llm import Step

        return Step(text=json.dumps(scores or SCORES))

    fake.default = respond


async def entries(app, user_id: int) -> list[JournalEntry]:
    async with app.db.session() as s:
        return list(
            (await s.exec(select(JournalEntry).where(JournalEntry.user_id == user_id))).all()
        )


async def test_journal_command_trigger_and_voice_note_store_scored_entries(app, fake_llm) -> None:
    fixed_scores(fake_llm)
    user = await add_user(app, "u1")
    r1 = await app.dispatcher.handle(make_inbound("/journal Coffee with Ana, calm afternoon"))
    r2 = await app.dispatcher.handle(make_inbound("Journal: long walk by the river"))
    voice = make_inbound("Journal, today I finally fixed the bike.")
    voice.attachments.append(Attachment("voice"))
    r3 = await app.dispatcher.handle(voice)
    assert {r1.status, r2.status, r3.status} == {"command"}
    assert "Saved to your journal" in (r1.reply or "")
    assert "happiness 72, stress 20, energy 64" in (r1.reply or "")
    rows = sorted(await entries(app, user.id or 0), key=lambda e: e.id or 0)
    assert [e.text for e in rows] == [
        "Coffee with Ana, calm afternoon",
        "long walk by the river",
        "today I finally fixed the bike.",
    ]
    assert [e.source for e in rows] == ["chat", "chat", "voice"]
    assert rows[0].scorer == "llm:fake-fast" and rows[0].people == ["Ana"]
    assert rows[0].reason == "a calm day with a friend"
    assert all(e.message_id is not None for e in rows)  # linked to the chat message
    # Search finds each entry once, as a journal entry (its chat message is not a second hit).
    await app.memory.index_pending(user.id)
    out = await app.memory.retriever.search(
        user.id or 0, "walk by the river", now=datetime.now(UTC), tz=ZoneInfo("UTC")
    )
    assert [e.item.kind for e in out.evidence] == ["journal"]
    assert out.evidence[0].item.text == "long walk by the river"
    assert len(channel(app).sent) == 3


async def test_plain_messages_mentioning_journal_go_to_the_agent(app, fake_llm) -> None:
    from tests.fakes.llm import say

    await add_user(app, "u1")
    fake_llm.add(say("Sure."))
    result = await app.dispatcher.handle(make_inbound("journal writing tips?"))
    assert result.status == "answered"
    assert await entries(app, 1) == []


async def test_edit_rescores_and_other_users_cannot_edit(app, fake_llm) -> None:
    fixed_scores(fake_llm)
    ana = await add_user(app, "ana")
    ben = await add_user(app, "ben")
    await app.dispatcher.handle(make_inbound("/journal fine day", sender="ana"))
    [entry] = await entries(app, ana.id or 0)
    fixed_scores(fake_llm, {**SCORES, "stress": 90, "reason": "worse than it looked"})
    stolen = await app.dispatcher.handle(
        make_inbound(f"/journal edit {entry.id} hacked", sender="ben")
    )
    assert f"no journal entry #{entry.id}" in (stolen.reply or "")
    res = await app.dispatcher.handle(
        make_inbound(f"/journal edit {entry.id} awful day after all", sender="ana")
    )
    assert "stress 90" in (res.reply or "")
    [after] = await entries(app, ana.id or 0)
    assert after.text == "awful day after all" and after.stress == 90
    assert await entries(app, ben.id or 0) == []


def write_folder(root: Path) -> None:
    (root / "2024").mkdir(parents=True)
    (root / "2024" / "2024-03-01.md").write_text("Started the new job. Nervous but excited.")
    (root / "2024" / "notes.md").write_text(
        "---\ntitle: a walk\ndate: 2024-03-02\n---\nWalked to the lighthouse with Leo.\n"
    )
    (root / "20240303 evening.txt").write_text("Quiet evening, soup and a film.")
    (root / "undated.md").write_text("No date anywhere here.")
    (root / "2024-03-04.md").write_text("   \n")
    (root / "2024-03-05.txt").write_bytes(b"\xff\xfe not utf-8 \xff")
    (root / "picture.png").write_bytes(b"\x89PNG")


async def test_folder_import_is_idempotent_reports_bad_files_and_rescores_edits(
    any_db_app, fake_llm, tmp_path: Path
) -> None:
    app = any_db_app  # SQLite, then PostgreSQL
    fixed_scores(fake_llm)
    user = await add_user(app, "alice", timezone="Europe/Lisbon")
    assert user.id is not None
    folder = tmp_path / "journal"
    write_folder(folder)
    report = await app.journal.import_dir(user.id, folder, timezone="Europe/Lisbon")
    assert (report.added, report.edited, report.unchanged) == (3, 0, 0)
    assert dict(report.bad) == {
        "undated.md": "no date in the file name or front matter (e.g. 2024-05-08.md)",
        "2024-03-04.md": "empty",
        "2024-03-05.txt": "not UTF-8 text",
    }
    rows = {e.day: e for e in await entries(app, user.id)}
    assert set(rows) == {date(2024, 3, 1), date(2024, 3, 2), date(2024, 3, 3)}
    assert rows[date(2024, 3, 2)].text == "Walked to the lighthouse with Leo."
    assert rows[date(2024, 3, 1)].source == "import"
    calls = len(fake_llm.chat_requests)

    again = await app.journal.import_dir(user.id, folder, timezone="Europe/Lisbon")
    assert (again.added, again.edited, again.unchanged) == (0, 0, 3)
    assert len(fake_llm.chat_requests) == calls  # scored once, never again for the same text

    (folder / "20240303 evening.txt").write_text("Argument with the landlord. Awful evening.")
    fixed_scores(fake_llm, {**SCORES, "happiness": 15})
    edited = await app.journal.import_dir(user.id, folder, timezone="Europe/Lisbon")
    assert (edited.added, edited.edited, edited.unchanged) == (0, 1, 2)
    assert len(fake_llm.chat_requests) == calls + 1
    rows = {e.day: e for e in await entries(app, user.id)}
    assert rows[date(2024, 3, 3)].happiness == 15

    # Entries are in memory search, as citable journal items.
    out = await app.memory.retriever.search(
        user.id, "lighthouse walk", now=datetime.now(UTC), tz=ZoneInfo("Europe/Lisbon")
    )
    assert out.evidence[0].item.kind == "journal"
    assert out.evidence[0].item.text == "Walked to the lighthouse with Leo."
    landlord = await app.memory.retriever.search(
        user.id, "landlord", now=datetime.now(UTC), tz=ZoneInfo("Europe/Lisbon")
    )
    assert landlord.evidence[0].item.text.startswith("Argument with the landlord")


async def test_offline_fallback_scores_without_any_llm(app_factory, tmp_path: Path) -> None:
    application = await app_factory(None)  # no LLM configured at all
    assert not application.llm.configured
    user = await add_user(application, "solo")
    folder = tmp_path / "j"
    folder.mkdir()
    (folder / "2024-01-01.md").write_text(
        "Deadline chaos, stressed and anxious, barely slept. Exhausted."
    )
    (folder / "2024-01-02.md").write_text(
        "Wonderful relaxed day at the beach with Sara, went for a swim, felt great."
    )
    await application.journal.import_dir(user.id or 0, folder, timezone="UTC")
    bad, good = sorted(await entries(application, user.id or 0), key=lambda e: e.day)
    assert bad.scorer == good.scorer == "lexicon"
    assert bad.stress is not None and good.stress is not None
    assert bad.stress > 70 and good.stress < 40
    assert (good.happiness or 0) > 70 and (bad.happiness or 100) < 30
    assert (good.energy or 0) > (bad.energy or 100)
    assert good.people == ["Sara"] and "sleep" in (bad.themes or [])
    # The same text always gets the same numbers (deterministic).
    assert LexiconScorer().score_now(bad.text).stress == bad.stress


async def test_rescore_cli_and_import_cli(tmp_path: Path) -> None:
    from bot.app.build import build_app, start_app
    from storage.repos.users import UserRepo
    from tests.support.app import make_settings
    from tests.support.cli import run_cli

    settings = make_settings(tmp_path)
    application = build_app(settings)
    await start_app(application)
    async with application.db.session() as s:
        await UserRepo(s).create("alice", timezone="UTC")
    await application.close()
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    folder = tmp_path / "journal"
    write_folder(folder)
    code, out, err = await run_cli(
        "import", "journal", str(folder), "--user", "alice", cwd=tmp_path, env=env
    )
    assert code == 0, err
    assert "Imported 3 journal entries (0 changed and scored again, 0 already there, " in out
    assert "3 bad files skipped" in out and "skipped undated.md: no date" in err
    code, out, err = await run_cli(
        "import", "journal", str(folder), "--user", "alice", cwd=tmp_path, env=env
    )
    assert "Imported 0 journal entries (0 changed and scored again, 3 already there" in out
    code, out, err = await run_cli("journal", "rescore", cwd=tmp_path, env=env)
    assert code == 0, err
    assert "Scored 3 journal entries again" in out
    code, out, err = await run_cli(
        "import", "journal", str(tmp_path / "missing"), "--user", "alice", cwd=tmp_path, env=env
    )
    assert code == 1 and "does not exist" in err
    application = build_app(settings)
    await start_app(application)
    async with application.db.session() as s:
        rows = await JournalRepo(s).all_for(None)
    await application.close()
    assert len(rows) == 3 and all(r.scorer == "lexicon" for r in rows)


def chat_and_scores(fake: FakeLLM, scores: dict[str, object] | None = None) -> None:
    """Score journal entries, route everything else to plain chat and answer it briefly."""
    from tests.fakes.llm import Step

    def respond(body):
        first = body["messages"][0]["content"]
        if "rate one personal journal entry" in first:
            return Step(text=json.dumps(scores or SCORES))
        if first.startswith("Classify the user's message"):
            return Step(text='{"route": "chat"}')
        return Step(text="Okay.")

    fake.default = respond


async def test_marking_an_earlier_message_makes_it_an_entry_once(app, fake_llm) -> None:
    from dataclasses import replace

    ana = await add_user(app, "ana")
    ben = await add_user(app, "ben")
    said = "Rough day, the deadline moved again and I'm exhausted"
    chat_and_scores(fake_llm, {**SCORES, "stress": 85, "people": []})
    await app.dispatcher.handle(make_inbound(said, sender="ana", message_id="t1"))
    first = await app.dispatcher.handle(make_inbound("/journal", sender="ana"))
    assert first.status == "command"
    assert "Added your message of" in (first.reply or "") and "stress 85" in (first.reply or "")
    [entry] = await entries(app, ana.id or 0)
    assert entry.text == said and entry.source == "chat" and entry.message_id is not None
    # Again, in words or as another /journal: the same entry, nothing added.
    for again in ("that's a journal entry", "/journal"):
        res = await app.dispatcher.handle(make_inbound(again, sender="ana"))
        assert f"already in your journal (#{entry.id})" in (res.reply or ""), again
    assert len(await entries(app, ana.id or 0)) == 1
    # Search now finds it once, as the journal entry.
    await app.memory.index_pending(ana.id)
    out = await app.memory.retriever.search(
        ana.id or 0, "deadline moved exhausted", now=datetime.now(UTC), tz=ZoneInfo("UTC")
    )
    assert [e.item.kind for e in out.evidence] == ["journal"]

    # A /journal sent as a reply (Telegram) adds the message it answers.
    chat_and_scores(fake_llm)
    calm = "Quiet morning, tea on the balcony"
    await app.dispatcher.handle(make_inbound(calm, sender="ana", message_id="t2"))
    await app.dispatcher.handle(make_inbound("what's the weather like", sender="ana"))
    reply = replace(make_inbound("/journal", sender="ana"), reply_to="t2")
    res = await app.dispatcher.handle(reply)
    assert "Added your message of" in (res.reply or "")
    assert sorted(e.text for e in await entries(app, ana.id or 0)) == sorted([said, calm])
    unknown = replace(make_inbound("/journal", sender="ana"), reply_to="t999")
    res = await app.dispatcher.handle(unknown)
    assert "I don't have that one" in (res.reply or "")

    # Ben cannot reach ana's messages, by reply or otherwise.
    stolen = replace(make_inbound("/journal", sender="ben"), reply_to="t2")
    assert "I don't have that one" in ((await app.dispatcher.handle(stolen)).reply or "")
    res = await app.dispatcher.handle(make_inbound("that's a journal entry", sender="ben"))
    assert (res.reply or "").startswith("Write a journal entry with /journal")
    assert await entries(app, ben.id or 0) == []


async def test_marking_a_command_is_refused(app, fake_llm) -> None:
    await add_user(app, "u1")
    await app.dispatcher.handle(make_inbound("/help"))
    res = await app.dispatcher.handle(make_inbound("/journal"))
    assert "is a command, not something to keep" in (res.reply or "")
    assert await entries(app, 1) == []


async def test_a_telegram_reply_with_journal_adds_the_message_it_answers(
    telegram, tg, fake_llm
) -> None:
    from storage.repos.users import UserRepo
    from tests.support.telegram import CHAT

    chat_and_scores(fake_llm)
    app = await telegram()
    async with app.db.session() as s:
        [ana] = await UserRepo(s).all()
    calm = tg.message(CHAT, "Quiet morning, tea on the balcony with Ana")
    await tg.push({"message": calm})
    await tg.send_text(CHAT, "what's the weather like")
    await tg.wait_texts(CHAT, 2)
    # Through python-telegram-bot: the reply names the earlier message, not the previous one.
    await tg.send_text(CHAT, "/journal", reply_to_message=calm)
    texts = await tg.wait_texts(CHAT, 3)
    assert texts[-1].startswith("Added your message of"), texts[-1]
    [entry] = await entries(app, ana.id or 0)
    assert entry.text == "Quiet morning, tea on the balcony with Ana"
