"""Who a question is about (issue 30): not every capitalised word is a person.

Alternatives joined by "or" are candidates, never filters; a capitalised word filters only
when the user's memory knows a person by that name (contacts, speakers, facts). An event
that names a time without a date ("after the move") no longer empties the search.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.retrieval.people import known_people
from bot.agent.retrieval.query import understand
from bot.app.build import App
from bot.app.importer import import_file
from storage.repos.facts import FactRepo
from storage.repos.people import ContactRepo
from tests.support.app import add_user

NOW = datetime(2024, 7, 1, 12, tzinfo=UTC)
TZ = ZoneInfo("UTC")
PEOPLE = ["Ana", "Rui", "Melanie", "Joanna", "Tim"]
THINGS = [("dog", "Biscuit", "Pepper"), ("cat", "Luna", "Miso"), ("car", "Fiesta", "Corolla"),
          ("city", "Porto", "Braga"), ("book", "Dune", "Emma")]  # fmt: skip
TEMPLATES = [
    "which {kind} did {who} adopt more recently, {a} or {b}?",
    "Did {who} pick {a} or {b} as the {kind}?",
    "What {kind} does {who} like best: {a}, {c} or {b}?",
    "{who} mentioned a {kind} lately - was it {a} or {b}",
]


def test_alternatives_are_candidates_and_the_person_stays_a_person() -> None:
    checked = 0
    for template, who, (kind, a, b) in itertools.product(TEMPLATES, PEOPLE, THINGS):
        text = template.format(who=who, kind=kind, a=a, b=b, c="Nemo")
        plan = understand(text, NOW, TZ)
        assert plan.people == [who], (text, plan.people)
        assert {a, b} <= set(plan.candidates), (text, plan.candidates)
        assert a.lower() in plan.terms and b.lower() in plan.terms, text
        checked += 1
    assert checked == len(TEMPLATES) * len(PEOPLE) * len(THINGS)


def test_with_the_memory_s_names_only_known_people_are_people() -> None:
    for who, (_kind, a, b) in itertools.product(PEOPLE, THINGS):
        text = f"When did {who} take {a} to {b}?"
        known = {who.lower(), "someone"}
        plan = understand(text, NOW, TZ, known_people=known)
        assert plan.people == [who], (text, plan.people)
        # a short form of a known name counts ("Mel" for Melanie)
        short = understand(f"what did {who[:3]} say about {a}?", NOW, TZ, known_people=known)
        assert short.people == [who[:3]], short.people


def test_places_after_in_and_the_are_not_people_without_a_known_list() -> None:
    for place in ["Lisbon", "Tampa", "Sweden", "Louvre"]:
        for text in (f"What did Ana do in {place}?", f"Did Ana like the {place}?"):
            assert understand(text, NOW, TZ).people == ["Ana"], text
    # ... but a possessive is still a person: "in Joanna's new book"
    assert understand("themes in Joanna's new book", NOW, TZ).people == ["Joanna"]


async def _import(app: App, user_id: int, tmp: Path, rows: list[tuple[str, str, str]]) -> None:
    path = tmp / "chat.jsonl"
    records = [
        {"id": f"t{i}", "ts": ts, "speaker": who, "text": text, "conversation": "c1"}
        for i, (ts, who, text) in enumerate(rows)
    ]
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    report = await import_file(app.db, user_id, path, timezone="UTC")
    await app.memory.after_import(user_id, report.conversations)


DOGS = [
    ("2024-01-10T10:00:00+00:00", "Ana", "We adopted a dog! His name is Biscuit."),
    ("2024-01-10T10:01:00+00:00", "me", "Congrats, send photos"),
    ("2024-03-02T09:00:00+00:00", "me", "My sister lives in Porto now"),
    ("2024-05-20T18:00:00+00:00", "Ana", "Another dog joined the family: we adopted Pepper."),
    ("2024-05-20T18:01:00+00:00", "me", "Two dogs, wow"),
    ("2024-06-01T08:00:00+00:00", "me", "Finally moved into the new flat. The move was exhausting"),
    ("2024-06-03T19:00:00+00:00", "me", "Bought a green sofa for the living room"),
]


async def test_the_answer_to_an_or_question_about_a_named_person_is_found(
    app: App, tmp_path: Path
) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    await _import(app, user.id, tmp_path, DOGS)
    out = await app.memory.retriever.search(
        user.id,
        "which dog did Ana adopt more recently, Biscuit or Pepper?",
        now=NOW,
        tz=TZ,
        kinds=("message",),
    )
    texts = [e.item.text for e in out.evidence]
    assert texts, out.note
    # newest first among the strong matches: Pepper's adoption leads
    assert texts[0] == "Another dog joined the family: we adopted Pepper."
    assert "We adopted a dog! His name is Biscuit." in texts


async def test_names_come_from_contacts_speakers_and_facts(app: App, tmp_path: Path) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    await _import(app, user.id, tmp_path, DOGS[:2])
    async with app.db.session() as s:
        await ContactRepo(s).add(user.id, "Rui Costa", aliases="Ruizinho")
        await FactRepo(s).add(user.id, "My dentist is Dr Ames", "health")
    corpus = await app.memory.index.corpus(user.id)
    known = await known_people(app.db, user.id, corpus.speaker_names)
    assert {"ana", "rui", "costa", "ruizinho", "ames"} <= known
    assert "me" not in known and "biscuit" not in known


@pytest.mark.parametrize(
    "question",
    ["what did I buy after the move?", "what did I buy since the move?",
     "what did I buy after I moved into the new flat?"],
)  # fmt: skip
async def test_an_undatable_event_still_finds_the_topic(
    app: App, tmp_path: Path, question: str
) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    await _import(app, user.id, tmp_path, DOGS)
    out = await app.memory.retriever.search(user.id, question, now=NOW, tz=TZ, kinds=("message",))
    texts = [e.item.text for e in out.evidence]
    assert "Bought a green sofa for the living room" in texts, (texts, out.note)
    # The move is dated by what was said about it, and the answer is told which day that was.
    assert out.note is not None and "as after Sat 01 Jun 2024" in out.note.replace("since", "after")
    assert "Finally moved into the new flat" in out.note
    assert "Finally moved into the new flat. The move was exhausting" not in texts
    assert all(e.item.ts >= datetime(2024, 6, 1, tzinfo=UTC) for e in out.evidence)


async def test_before_an_event_searches_up_to_the_day_it_was_mentioned(
    app: App, tmp_path: Path
) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    await _import(app, user.id, tmp_path, DOGS)
    out = await app.memory.retriever.search(
        user.id, "where did my sister live before the move?", now=NOW, tz=TZ, kinds=("message",)
    )
    texts = [e.item.text for e in out.evidence]
    assert "My sister lives in Porto now" in texts, (texts, out.note)
    assert all(e.item.ts < datetime(2024, 6, 1, tzinfo=UTC) for e in out.evidence)


async def test_an_event_memory_never_mentions_stays_a_soft_hint(app: App, tmp_path: Path) -> None:
    user = await add_user(app, "u1")
    assert user.id is not None
    await _import(app, user.id, tmp_path, DOGS)
    out = await app.memory.retriever.search(
        user.id, "what did I buy after the wedding?", now=NOW, tz=TZ, kinds=("message",)
    )
    texts = [e.item.text for e in out.evidence]
    assert "Bought a green sofa for the living room" in texts, (texts, out.note)
    assert out.note is not None and "by topic alone" in out.note
