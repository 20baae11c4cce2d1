"""A named time with nothing clearly about the question: the window's items closest first.

When no item inside a named time passes the evidence floors, the search still shows what that
time holds (never wider), but in the order of how close each item is to the question, not in
the order it was said: a month listed from its first day would put the one relevant line of
its last week behind thirty about other things (#30, temporal questions).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.app.build import App
from bot.app.importer import import_file
from tests.support.app import add_user

TZ = ZoneInfo("UTC")
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


async def test_a_month_with_no_clear_match_shows_the_closest_item_first(
    app: App, tmp_path: Path
) -> None:
    user = await add_user(app, "ana", timezone="UTC")
    assert user.id is not None
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    records = [
        {
            "id": f"m{day}",
            "ts": (start + timedelta(days=day)).isoformat(),
            "speaker": "me",
            "text": FILLER[day % len(FILLER)] + f" (day {day + 1})",
            "conversation": "diary",
        }
        for day in range(28)
    ]
    records.append(
        {
            "id": "bread",
            "ts": datetime(2024, 3, 30, 18, tzinfo=UTC).isoformat(),
            "speaker": "me",
            "text": "Tried a sourdough loaf at the weekend, the crust came out great",
            "conversation": "diary",
        }
    )
    path = tmp_path / "diary.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    report = await import_file(app.db, user.id, path, timezone="UTC")
    await app.memory.after_import(user.id, report.conversations)

    out = await app.memory.retriever.search(
        user.id,
        "what did I cook in March 2024?",
        now=datetime(2024, 6, 1, tzinfo=UTC),
        tz=TZ,
        limit=5,
        kinds=("message",),
    )
    texts = [e.item.text for e in out.evidence]
    # Nothing passes the floors (no shared word, a loose meaning): the window is listed...
    assert {e.matched for e in out.evidence} == {"time"}
    assert len(texts) == 25  # the listing's size, never wider than March
    assert all(e.item.ts.month == 3 for e in out.evidence)
    # ...with the line about food first, not the first days of the month.
    assert texts[0].startswith("Tried a sourdough loaf"), texts[:3]
