"""Kinds of question the search must not empty or misorder (#30).

A named time with nothing clearly about the question: when no item inside a named time passes
the evidence floors, the search still shows what that time holds (never wider), but in the order
of how close each item is to the question, not in the order it was said: a month listed from its
first day would put the one relevant line of its last week behind thirty about other things.

"What did Joanna recently recommend to Nate?": Nate need not be named in Joanna's turn when he
is the one she is talking to; a "recently" question keeps turns of talks both take part in.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.retrieval.search import Evidence
from bot.app.build import App
from bot.app.importer import import_file
from tests.support.app import add_user

TZ = ZoneInfo("UTC")


@pytest.fixture
async def ana(app: App) -> int:
    """A user in UTC; her id."""
    user = await add_user(app, "ana", timezone="UTC")
    assert user.id is not None
    return user.id


async def _import(app: App, user_id: int, tmp: Path, records: list[dict[str, str]]) -> None:
    path = tmp / "chat.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    report = await import_file(app.db, user_id, path, timezone="UTC")
    assert report.added == len(records)
    await app.memory.after_import(user_id, report.conversations)


FILLER = [
    "The train was late again this morning",
    "Rain all day, stayed inside with a podcast",
    "Meeting with the landlord about the boiler",
    "Paid the electricity bill finally",
    "My manager moved the quarterly review to Thursday",
    "Long phone call with the bank about a card",
    "The neighbours had a loud party",
    "Started reading a thriller about a heist",
    "Fixed the squeaky door hinge",
    "Renewed the car insurance online",
]


def _turn(n: int, when: datetime, speaker: str, text: str, chat: str) -> dict[str, str]:
    return {
        "id": f"{chat}-{n}",
        "ts": (when + timedelta(minutes=n)).isoformat(),
        "speaker": speaker,
        "text": text,
        "conversation": chat,
    }


async def _ask(app: App, user_id: int, question: str) -> list[Evidence]:
    """What a search finds for ``question``, asked on 1 June 2024, best first."""
    out = await app.memory.retriever.search(
        user_id,
        question,
        now=datetime(2024, 6, 1, tzinfo=UTC),
        tz=TZ,
        limit=5,
        kinds=("message",),
    )
    return out.evidence


async def test_a_month_with_no_clear_match_shows_the_closest_item_first(
    app: App, ana: int, tmp_path: Path
) -> None:
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    records = [
        _turn(
            day, start + timedelta(days=day), "me", f"{FILLER[day % 10]} (day {day + 1})", "diary"
        )
        for day in range(28)
    ]
    evening = datetime(2024, 3, 30, 18, tzinfo=UTC)
    bread = "Tried a sourdough loaf at the weekend, the crust came out great"
    records.append(_turn(28, evening, "me", bread, "diary"))
    await _import(app, ana, tmp_path, records)

    found = await _ask(app, ana, "what did I cook in March 2024?")
    texts = [e.item.text for e in found]
    # Nothing passes the floors (no shared word, a loose meaning): the window is listed...
    assert {e.matched for e in found} == {"time"}
    assert len(texts) == 25  # the listing's size, never wider than March
    assert all(e.item.ts.month == 3 for e in found)
    # ...with the line about food first, not the first days of the month.
    assert texts[0] == bread, texts[:3]


async def test_recently_to_someone_keeps_the_turns_of_talks_with_them(
    app: App, ana: int, tmp_path: Path
) -> None:
    with_nate = datetime(2024, 2, 7, 9, tzinfo=UTC)
    with_tom = datetime(2024, 4, 2, 9, tzinfo=UTC)
    records = [
        _turn(0, with_nate, "Nate", "Hey Joanna, any film I should see this week?", "nate"),
        _turn(1, with_nate, "Joanna", "You should watch Little Women, I loved it", "nate"),
        _turn(2, with_nate, "Nate", "Adding it to my list, thanks!", "nate"),
        _turn(0, with_tom, "Tom", "Joanna! Bored tonight, ideas?", "tom"),
        _turn(1, with_tom, "Joanna", "You should watch Dune, it is great", "tom"),
        _turn(2, with_tom, "Tom", "Nice, will do", "tom"),
    ]
    await _import(app, ana, tmp_path, records)

    found = await _ask(app, ana, "What did Joanna recently recommend Nate to watch?")
    texts = [e.item.text for e in found]
    # Joanna's turn in her talk with Nate, though it does not say his name; not her newer
    # advice to Tom, a talk Nate was not in.
    assert texts and texts[0] == "You should watch Little Women, I loved it", texts
    assert "You should watch Dune, it is great" not in texts
