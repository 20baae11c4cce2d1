"""MEMORY.md round trips (issue 30): write, edit, apply; and edits that meet chat changes.

The file is what a person reads and edits; every edit comes back (added, changed and removed
facts and rules), and a fact changed in chat after the file was written is never overwritten:
the conflict is shown with both versions.
"""

from __future__ import annotations

import re

import pytest

from bot.agent.memory.memory_file import MemoryFileError, apply_text, parse
from bot.app.build import App
from storage.repos.facts import FactRepo
from tests.support.app import add_user
from tests.support.memory_file import active_fact, active_facts, memory_file

FACTS = [
    ("My sister is Ana Lima", "people"),
    ("Never book meetings before 10", "rule"),
    ("I prefer window seats on trains", "preferences"),
    ("The spare key is under the blue pot", "notes"),
]


async def _user_with_facts(app: App, name: str = "ana") -> int:
    user = await add_user(app, name, name=name.capitalize())
    assert user.id is not None
    for text, category in FACTS:
        decision = await app.memory.remember(user.id, text, category=category)
        assert decision.action == "added", decision
    return user.id


def _edit(text: str, old: str, new: str) -> str:
    """Replace the words of one fact line, keeping its marker."""
    assert f"- {old} <!--" in text, old
    return text.replace(f"- {old} <!--", f"- {new} <!--")


def _drop(text: str, old: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(f"- {old} <!--"))


def _add(text: str, heading: str, line: str) -> str:
    return text.replace(f"## {heading}\n", f"## {heading}\n- {line}\n")


async def test_the_file_reads_as_headings_and_one_line_per_fact(app: App) -> None:
    user_id = await _user_with_facts(app)
    text = await memory_file(app, user_id)
    assert text.startswith("# What lifebot remembers about Ana\n")
    sections = re.findall(r"^## (\w+)", text, flags=re.MULTILINE)
    assert sections[:2] == ["Rules", "People"]
    rules = text.split("## Rules\n")[1].split("##")[0]
    assert rules.startswith("- Never book meetings before 10 <!-- #")
    # parse(render) gives the same facts back, with their ids
    parsed = parse(text)
    assert {(line.text, line.category) for line in parsed.lines} == set(FACTS)
    assert all(line.fact_id is not None for line in parsed.lines)
    assert parsed.written_at is not None


async def test_added_changed_and_removed_lines_come_back(app: App) -> None:
    user_id = await _user_with_facts(app)
    text = await memory_file(app, user_id)
    text = _edit(text, "I prefer window seats on trains", "I prefer aisle seats on trains")
    text = _drop(text, "The spare key is under the blue pot")
    text = _add(text, "People", "Rui is my cousin in Porto")
    text = _add(text, "Rules", "Never schedule calls after 21:00")
    report = await apply_text(app.memory.keeper, user_id, text, app.clock.now())

    assert report.changed == [("I prefer window seats on trains", "I prefer aisle seats on trains")]
    assert report.removed == ["The spare key is under the blue pot"]
    assert sorted(report.added) == ["Never schedule calls after 21:00", "Rui is my cousin in Porto"]
    assert report.conflicts == []
    assert await active_facts(app, user_id) == {
        "My sister is Ana Lima": "people",
        "Never book meetings before 10": "rule",
        "I prefer aisle seats on trains": "preferences",
        "Rui is my cousin in Porto": "people",
        "Never schedule calls after 21:00": "rule",
    }
    # the changed fact keeps its history: the old words are superseded, not lost
    async with app.db.session() as s:
        every = await FactRepo(s).every(user_id)
    old = next(f for f in every if f.text == "I prefer window seats on trains")
    assert old.superseded_by is not None
    # applying the same file twice changes nothing more
    again = await apply_text(
        app.memory.keeper, user_id, await memory_file(app, user_id), app.clock.now()
    )
    assert again.nothing and "Nothing to change" in again.describe()


async def test_a_line_moved_under_another_heading_changes_its_category(app: App) -> None:
    user_id = await _user_with_facts(app)
    text = _drop(await memory_file(app, user_id), "My sister is Ana Lima")
    text = _add(text, "Notes", "My sister is Ana Lima")
    await apply_text(app.memory.keeper, user_id, text, app.clock.now())
    # a line without its marker is a new line: the old fact goes, the same words come back
    assert (await active_facts(app, user_id))["My sister is Ana Lima"] == "notes"
    text = await memory_file(app, user_id)
    line = next(ln for ln in text.splitlines() if ln.startswith("- My sister is Ana Lima"))
    moved = _drop(text, "My sister is Ana Lima").replace("## Health\n", f"## Health\n{line}\n")
    report = await apply_text(app.memory.keeper, user_id, moved, app.clock.now())
    assert len(report.changed) == 1
    assert (await active_facts(app, user_id))["My sister is Ana Lima"] == "health"


async def test_a_change_made_in_chat_since_the_file_was_written_is_shown_not_lost(
    app: App,
) -> None:
    user_id = await _user_with_facts(app)
    text = await memory_file(app, user_id)  # the person downloads the file ...
    # ... meanwhile, in chat: one fact changed, one forgotten, one learned
    async with app.db.session() as s:
        by_text = {f.text: f for f in await FactRepo(s).active(user_id)}
    now = app.clock.now()
    seats = by_text["I prefer window seats on trains"]
    await app.memory.keeper.replace(
        user_id, seats.id or 0, "I prefer window seats on planes", "preferences", now
    )
    await app.memory.keeper.forget(
        user_id, by_text["The spare key is under the blue pot"].id or 0, now
    )
    await app.memory.remember(user_id, "Rui's birthday is on 4 May", category="events")
    # ... and the file is edited on the same facts, and hands back
    text = _edit(text, "I prefer window seats on trains", "I prefer aisle seats on trains")
    text = _edit(text, "The spare key is under the blue pot", "The spare key is with Ana")
    text = _drop(text, "My sister is Ana Lima")
    report = await apply_text(app.memory.keeper, user_id, text, app.clock.now())

    said = report.describe()
    assert len(report.conflicts) == 2, said
    assert 'the file says "I prefer aisle seats on trains"' in said
    assert 'in chat it became "I prefer window seats on planes"' in said
    assert 'the file says "The spare key is with Ana"' in said
    assert "in chat it was forgotten" in said
    assert "Kept (learned in chat after the file was written): Rui's birthday is on 4 May" in said
    assert report.removed == ["My sister is Ana Lima"]  # untouched in chat: the file decides
    active = await active_facts(app, user_id)
    assert "I prefer window seats on planes" in active  # the chat's newer change stands
    assert "I prefer aisle seats on trains" not in active
    assert "The spare key is with Ana" not in active
    assert "Rui's birthday is on 4 May" in active


async def test_removing_a_line_that_chat_changed_since_is_a_conflict(app: App) -> None:
    user_id = await _user_with_facts(app)
    text = await memory_file(app, user_id)
    seats = await active_fact(app, user_id, "seats")
    await app.memory.keeper.replace(
        user_id, seats.id or 0, "I prefer window seats on planes", "preferences", app.clock.now()
    )
    report = await apply_text(app.memory.keeper, user_id, _drop(text, seats.text), app.clock.now())
    assert [c.in_file for c in report.conflicts] == [None]
    assert "the file removes it" in report.describe()
    assert "I prefer window seats on planes" in await active_facts(app, user_id)


async def test_a_file_cannot_touch_another_user_s_facts(app: App) -> None:
    ana = await _user_with_facts(app, "ana")
    ben = await add_user(app, "ben", name="Ben")
    assert ben.id is not None
    stolen = await memory_file(app, ana)  # Ana's markers, handed in as Ben's file
    stolen = _edit(stolen, "My sister is Ana Lima", "My sister is someone else")
    report = await apply_text(app.memory.keeper, ben.id, stolen, app.clock.now())
    assert report.changed == [] and report.removed == []
    assert "My sister is Ana Lima" in await active_facts(app, ana)  # untouched
    assert "My sister is someone else" in await active_facts(app, ben.id)  # Ben's own new fact


async def test_without_the_written_line_nothing_is_forgotten(app: App) -> None:
    user_id = await _user_with_facts(app)
    text = await memory_file(app, user_id)
    text = "\n".join(ln for ln in text.splitlines() if "lifebot memory file; written" not in ln)
    report = await apply_text(
        app.memory.keeper, user_id, _drop(text, "My sister is Ana Lima"), app.clock.now()
    )
    assert report.removed == [] and report.removals_skipped
    assert "My sister is Ana Lima" in await active_facts(app, user_id)


def test_a_bad_file_is_refused_in_plain_words() -> None:
    with pytest.raises(MemoryFileError, match="not a date"):
        parse("<!-- lifebot memory file; written 2026-13-45T99:00:00Z. -->\n## Notes\n- x y z")
    with pytest.raises(MemoryFileError, match="longer than"):
        parse("- a\n" * 100_000)
