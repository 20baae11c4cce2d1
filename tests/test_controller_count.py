"""Question types, through dispatch: a count is answered from a structured query."""

from __future__ import annotations

import json
from pathlib import Path

from bot.agent.intent import classify_intent
from bot.agent.questions import QuestionKind, question_kind
from bot.agent.tools import default_registry
from bot.app.build import App
from bot.app.features import route_by_intent
from bot.app.importer import import_file
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound

CORPUS = [
    ("2026-03-02T07:10:00+00:00", "me", "Went for a run by the river, 6k."),
    ("2026-03-02T19:00:00+00:00", "me", "Legs sore after this morning's run."),  # same day
    ("2026-03-09T08:00:00+00:00", "me", "Ran 5k before work."),
    ("2026-03-16T18:30:00+00:00", "me", "Running club was great tonight."),
    ("2026-03-20T07:00:00+00:00", "me", "Skipped my run, too tired."),  # did not happen
    ("2026-03-21T12:00:00+00:00", "me", "Brunch with Ana at the harbour."),  # not a run
    ("2026-03-22T10:00:00+00:00", "Ben", "I ran a half marathon today!"),  # not the user
    ("2026-04-02T07:00:00+00:00", "me", "First run of April."),  # outside March
]


async def _plant(app: App, user_id: int, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    rows = [
        {"id": f"n{i}", "ts": ts, "speaker": who, "text": text}
        for i, (ts, who, text) in enumerate(CORPUS)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    report = await import_file(app.db, user_id, path)
    assert report.added == len(CORPUS)
    await app.memory.index_pending(user_id)


async def test_how_many_times_did_i_run_in_march_is_a_structured_count(
    app: App, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    user = await add_user(app)
    assert user.id is not None
    await _plant(app, user.id, tmp_path)
    fake_llm.add(
        call("count_times", {"what": "run", "start": "2026-03-01", "end": "2026-03-31"}),
        say("You ran on 3 days in March [1][2][3][4]."),
    )
    await app.dispatcher.handle(make_inbound("how many times did I run in March 2026?"))

    first = fake_llm.chat_requests[-2]
    offered = {t["function"]["name"] for t in first["tools"]}
    assert "count_times" in offered and "search_memory" not in offered
    result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert result.startswith("3 days from 01 March 2026 to 31 March 2026")
    assert "Skipped" not in result and "Brunch" not in result and "half marathon" not in result
    sent = channel(app).sent[-1]
    assert sent.text == "You ran on 3 days in March [1][2][3][4]."
    # every counted line is cited, two on the same day too
    assert [c.snippet for c in sent.citations] == [
        "Went for a run by the river, 6k.",
        "Legs sore after this morning's run.",
        "Ran 5k before work.",
        "Running club was great tonight.",
    ]


def test_question_types_are_recognised() -> None:
    assert question_kind("how many times did I go running last month?") is QuestionKind.COUNT
    assert question_kind("did I run more in March than in April?") is QuestionKind.COMPARE
    assert question_kind("what did I do in March?") is QuestionKind.BROWSE
    assert question_kind("give me a recap of my week") is QuestionKind.SUMMARY
    assert question_kind("when is my dentist appointment?") is QuestionKind.FACT
    assert classify_intent(
        "how often did I swim in May", route_by_intent(default_registry())
    ).groups == {"count"}
