"""Counts by identity and by meaning (issue 30).

The user's own lines are found by who said them (chat and voice notes, imported lines under
the user's own name, pendant transcripts, the journal), not only by the speakers "", "me" and
"ambient"; an activity counts by what the line means ("I went for a run"), not by its
letters ("running late"); and every counted line is cited so the user can check.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from pathlib import Path

import pytest

from bot.agent.activities import activity, did
from bot.app.build import App
from bot.app.importer import import_file
from storage.repos.messages import MessageRepo
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound

DID = {
    "run": [
        "I went for a run", "Went for a run by the river, 6k", "Ran 5k before work",
        "this morning's run was hard", "a quick jog around the park", "Jogged to the beach",
        "We ran along the coast", "Did my parkrun", "Running club was great tonight",
        "Finally back to running", "My sister and I went running", "Legs sore after the run",
    ],
    "swim": ["Swam 30 laps", "went swimming at Alvalade", "A long swim in the sea",
             "We swam before lunch"],
    "gym": ["Gym at 7", "Worked out with Rui", "Good workout today", "Lifted weights for an hour"],
    "cycle": ["Cycled to work", "Bike ride along the river", "Rode my bike to the market",
              "Went cycling with Ana"],
}  # fmt: skip
DID_NOT = {
    "run": [
        "Running late, start without me", "Ran out of milk again", "We're running low on coffee",
        "Bought new running shoes", "Ben ran a half marathon today!", "She went for a run",
        "Skipped my run, too tired", "Didn't run today", "Ran into Ana at the market",
        "In the long run it is cheaper", "They run a small bakery", "I'm running a fever",
        "Brunch with Ana at the harbour", "Ana and Rui went running", "The script ran over",
        "He runs every morning",
    ],
    "swim": ["Need a new swimming suit", "My head is swimming", "Missed my swim",
             "Rui swam across the lake"],
    "gym": ["Cancelled the gym membership", "Skipped the gym", "Ana's gym bag is here"],
    "cycle": ["The news cycle is exhausting", "Washing machine on a spin cycle",
              "He cycled to work"],
}  # fmt: skip
OPENERS = ["", "Today: ", "Lovely day. ", "Ok so "]


@pytest.mark.parametrize("what", list(DID))
def test_lines_that_mean_the_activity_count_and_lookalikes_do_not(what: str) -> None:
    act = activity(what)
    for opener, line in itertools.product(OPENERS, DID[what]):
        assert did(act, opener + line), opener + line
    for opener, line in itertools.product(OPENERS, DID_NOT[what]):
        assert not did(act, opener + line), opener + line


def test_asked_in_other_words_it_is_the_same_activity() -> None:
    for asked in ("running", "going for a run", "jogging", "run"):
        assert did(activity(asked), "I went for a run") and not did(activity(asked), "running late")
    assert did(activity("yoga"), "Yoga class at 8, lovely")
    assert not did(activity("yoga"), "Skipped yoga")


# (time, speaker, text, counted?): the user is "Ana Lima"; Ben is someone else.
LINES = [
    ("2026-03-02T07:10:00+00:00", "Ana Lima", "Went for a run by the river, 6k.", True),
    ("2026-03-02T19:00:00+00:00", "me", "Legs sore after this morning's run.", True),
    ("2026-03-05T08:00:00+00:00", "Ana Lima", "Running late, start without me!", False),
    ("2026-03-06T08:00:00+00:00", "me", "We're running low on coffee", False),
    ("2026-03-09T08:00:00+00:00", "Ben", "I ran a half marathon today!", False),
    ("2026-03-11T12:00:00+00:00", "Ben", "Going for a run later", False),
    ("2026-03-20T07:00:00+00:00", "Ana Lima", "Skipped my run, too tired.", False),
    ("2026-04-02T07:00:00+00:00", "me", "First run of April.", False),  # outside March
]
PENDANT = ("2026-03-14T09:30:00+00:00", "I went for a run with Rui along the beach.")
VOICE = ("2026-03-18T18:00:00+00:00", "Just got back from a run, feeling great")


async def _plant(app: App, user_id: int, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    rows = [
        {"id": f"n{i}", "ts": ts, "speaker": who, "text": text}
        for i, (ts, who, text, _) in enumerate(LINES)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    report = await import_file(app.db, user_id, path)
    assert report.added == len(LINES)
    async with app.db.session() as s:
        # A pendant transcript, stored as the device hub stores it (bot/device/hub.py).
        await MessageRepo(s).add_new_rows(
            [
                {"user_id": user_id, "direction": "in", "role": "user", "channel": "device",
                 "account": "device", "chat_id": "ambient:pendant-1", "sender_id": "ambient",
                 "external_id": "s1:1", "dedupe_key": "device:test:1", "text": PENDANT[1],
                 "status": "stored", "created_at": datetime.fromisoformat(PENDANT[0]),
                 "meta": {"speaker": "pendant", "device": "pendant-1"}},
            ]
        )  # fmt: skip
    await app.memory.index_pending(user_id)


async def test_a_count_finds_the_user_s_lines_by_identity_and_cites_each(
    any_db_app: App, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = any_db_app
    user = await add_user(app, name="Ana Lima")
    assert user.id is not None
    await _plant(app, user.id, tmp_path)
    # A voice note's transcript arrives as the user's own chat message.
    fake_llm.default = lambda _body: say("Nice run!")
    voice = make_inbound(VOICE[1])
    voice.received_at = datetime.fromisoformat(VOICE[0])
    await app.dispatcher.handle(voice)
    fake_llm.default = None

    fake_llm.add(
        call("count_times", {"what": "run", "start": "2026-03-01", "end": "2026-03-31"}),
        say("You ran on 3 days in March [1][2][3][4]."),
    )
    await app.dispatcher.handle(make_inbound("how many times did I run in March 2026?"))
    result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert result.startswith("3 days from 01 March 2026 to 31 March 2026"), result
    assert "(4 lines;" in result
    counted = [text for _, _, text, yes in LINES if yes] + [PENDANT[1], VOICE[1]]
    for text in counted:
        assert text in result, text
    for _, _, text, yes in LINES:
        if not yes:
            assert text not in result, text
    # every counted line has its own number: the user can open each
    numbered = [line for line in result.splitlines() if line.startswith("[")]
    assert len(numbered) == len(counted)
    sent = channel(app).sent[-1]
    assert sorted(c.snippet for c in sent.citations) == sorted(counted)
