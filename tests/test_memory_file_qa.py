"""MEMORY.md as people really edit it (outside QA of issue 30).

Each test is a round trip a person does: hand the same file back twice, fix a capital letter,
copy a line to split a fact, write too much, or delete every line. None of them may lose an
edit silently, invent a conflict, or forget everything without being asked.
"""

from __future__ import annotations

import html
import json
import logging
import re
import time
from pathlib import Path

import pytest

from bot.adapters.telegram.format import markdown_to_html
from bot.agent.memory.memory_file import (
    MAX_NEW_FACTS,
    ApplyReport,
    MemoryFileError,
    apply_text,
)
from bot.app.build import App
from storage.repos.facts import FactRepo
from tests.support.app import add_user, channel
from tests.support.builders import make_inbound
from tests.support.cli import run_cli
from tests.support.memory_file import active_fact, active_facts, memory_file
from tests.support.web import client_for, sign_in

FACTS = [
    ("My sister is Ana Lima", "people"),
    ("Never book meetings before 10", "rule"),
    ("The spare key is under the blue pot", "notes"),
]


async def _ana(app: App) -> int:
    user = await add_user(app, "ana", name="Ana")
    assert user.id is not None
    for text, category in FACTS:
        assert (await app.memory.remember(user.id, text, category=category)).action == "added"
    return user.id


async def _apply(app: App, user_id: int, text: str) -> ApplyReport:
    return await apply_text(app.memory.keeper, user_id, text, app.clock.now())


def _line(text: str, words: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"- {words} <!--"))


async def test_the_same_edited_file_handed_back_twice_changes_nothing_more(
    any_db_app: App,
) -> None:
    app = any_db_app
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    text = text.replace("- My sister is Ana Lima <!--", "- My sister is Ana Costa <!--")
    text = text.replace("## Notes\n", "## Notes\n- The wifi password is on the fridge\n")
    first = await _apply(app, user_id, text)
    assert first.changed and first.added and not first.conflicts

    again = await _apply(app, user_id, text)  # e.g. Save pressed twice, or the same upload
    said = again.describe()
    assert again.conflicts == [], said  # the file and lifebot agree: nothing to settle
    assert again.nothing and "Kept (learned in chat" not in said, said
    assert await active_facts(app, user_id) == {
        "My sister is Ana Costa": "people",
        "Never book meetings before 10": "rule",
        "The spare key is under the blue pot": "notes",
        "The wifi password is on the fridge": "notes",
    }


async def test_a_capital_letter_or_full_stop_fixed_in_the_file_is_kept(any_db_app: App) -> None:
    app = any_db_app
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    edited = text.replace("- My sister is Ana Lima <!--", "- My sister is ana lima. <!--")
    report = await _apply(app, user_id, edited)
    assert report.changed == [("My sister is Ana Lima", "My sister is ana lima.")]
    assert "My sister is ana lima." in await active_facts(app, user_id)
    assert (await _apply(app, user_id, edited)).conflicts == []


async def test_a_copied_line_keeps_both_facts(app: App) -> None:
    """Copying a line (marker and all) and rewording the copy splits one fact into two."""
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    line = _line(text, "The spare key is under the blue pot")
    copy = line.replace("The spare key is under the blue pot", "The car key is in the drawer")
    report = await _apply(app, user_id, text.replace(line, f"{line}\n{copy}"))
    assert report.added == ["The car key is in the drawer"] and report.changed == []
    active = await active_facts(app, user_id)
    assert "The spare key is under the blue pot" in active
    assert "The car key is in the drawer" in active


async def test_an_edit_that_cannot_be_kept_is_said_not_dropped(app: App) -> None:
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    long = "Never book meetings before 10 " + "because I walk the dog first " * 8
    report = await _apply(
        app, user_id, text.replace("- Never book meetings before 10 <!--", f"- {long} <!--")
    )
    said = report.describe()
    assert not report.nothing and "Nothing to change" not in said, said
    assert "Not changed" in said and "40 words" in said, said
    assert "Never book meetings before 10" in await active_facts(app, user_id)


async def test_a_file_with_every_line_deleted_forgets_nothing_without_asking(app: App) -> None:
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    emptied = "\n".join(ln for ln in text.splitlines() if not ln.startswith("- "))
    report = await _apply(app, user_id, emptied)
    assert report.removed == []
    assert "no facts" in report.describe() and "/forget" in report.describe()
    assert len(await active_facts(app, user_id)) == len(FACTS)


async def test_a_very_long_line_is_not_kept_as_a_fact(app: App) -> None:
    """Forty words is the limit, and one 'word' of 5,000 characters is not a fact either:
    every fact goes into every prompt."""
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    pasted = "https://example.test/" + "a1b2" * 1_250
    report = await _apply(app, user_id, text.replace("## Notes\n", f"## Notes\n- {pasted}\n"))
    assert report.added == [] and "Not added" in report.describe()
    assert pasted not in await active_facts(app, user_id)


async def test_the_file_copied_out_of_a_telegram_message_comes_back(app: App) -> None:
    """Telegram shows headings bold and bullets as "•": that is what a person copies back."""
    user_id = await _ana(app)
    await app.dispatcher.handle(make_inbound("/memoryfile", sender="ana"))
    sent = channel(app).texts("ana")[-1].split("\n\nEdit it and send it back")[0]
    shown = html.unescape(re.sub(r"<[^>]+>", "", markdown_to_html(sent)))
    assert "## Rules" not in shown and "\u2022 My sister is Ana Lima <!--" in shown
    edited = shown.replace(
        "\u2022 My sister is Ana Lima <!--", "\u2022 My sister is Ana Costa <!--"
    )
    await app.dispatcher.handle(make_inbound(f"/memoryfile\n{edited}", sender="ana"))
    reply = channel(app).texts("ana")[-1]
    assert reply == 'Changed: "My sister is Ana Lima" is now "My sister is Ana Costa"', reply
    assert await active_facts(app, user_id) == {
        "My sister is Ana Costa": "people",
        "Never book meetings before 10": "rule",
        "The spare key is under the blue pot": "notes",
    }


async def test_a_file_cut_short_forgets_nothing_it_lost(app: App) -> None:
    """A copy missing its end (a chat message split in two, a partial paste, an upload cut
    off) must not read as "the person deleted every line after the cut"."""
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    key = await active_fact(app, user_id, "spare key")
    await app.memory.keeper.replace(
        user_id, key.id or 0, "The spare key is under the red pot", "notes", app.clock.now()
    )  # changed in chat meanwhile, and lost from the copy: not "the file removes it" either
    cut = text[: text.index("## Notes")]  # the Notes section, and the end, are lost
    cut = cut.replace("- My sister is Ana Lima <!--", "- My sister is Ana Costa <!--")
    report = await _apply(app, user_id, cut)
    assert report.removed == [] and report.changed and not report.conflicts, report.describe()
    assert "end" in report.describe() and "not forgotten" in report.describe()
    assert "The spare key is under the red pot" in await active_facts(app, user_id)


async def test_a_fact_added_in_chat_through_the_file_is_searchable_with_its_source(
    app: App, tmp_path: Path
) -> None:
    """Like /remember: the message that taught the fact is its source, so a hit can be checked."""
    await _ana(app)
    await app.dispatcher.handle(make_inbound("/memoryfile", sender="ana"))
    sent = channel(app).texts("ana")[-1].split("\n\nEdit it and send it back")[0]
    added = sent.replace("## Notes\n", "## Notes\n- The wifi password is on the fridge door\n")
    await app.dispatcher.handle(make_inbound(f"/memoryfile\n{added}", sender="ana"))
    assert channel(app).texts("ana")[-1].startswith("Added: The wifi password")
    code, out, err = await run_cli(
        "memory", "search", "wifi password", "--user", "ana", "--kinds", "fact", "--json",
        cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    assert code == 0, err
    hit = next(h for h in json.loads(out) if "wifi" in h["text"])
    assert hit["sources"] and all(hit["sources"]), hit


async def test_an_old_copy_does_not_bring_back_a_fact_forgotten_since(app: App) -> None:
    user_id = await _ana(app)
    text = await memory_file(app, user_id)  # downloaded before ...
    key = await active_fact(app, user_id, "spare key")
    await app.dispatcher.handle(make_inbound(f"/forget {key.id}", sender="ana"))  # ... this
    edited = text.replace("- My sister is Ana Lima <!--", "- My sister is Ana Costa <!--")
    report = await _apply(app, user_id, edited)
    assert report.changed and report.conflicts == [] and report.added == []
    assert "The spare key is under the blue pot" not in await active_facts(app, user_id)


async def test_nobody_else_reads_or_writes_a_person_s_file(app: App) -> None:
    """Ben's session sees and changes only Ben's file; Ana's API token opens no file page."""
    ana_id = await _ana(app)
    ana = await app.web.service.accounts.user(ana_id)
    ben = await add_user(app, "ben", name="Ben")
    assert ana is not None and ben.id is not None
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ana)
        made = await client.post(
            "/settings/tokens", data={"csrf": csrf, "name": "phone", "scope": "write"}
        )
        token = made.text.split('id="api-token">', 1)[1].split("<", 1)[0]
        anas = (await client.get("/memory/file.md")).text
    async with client_for(app) as client:
        bearer = {"Authorization": f"Bearer {token}"}
        for path in ("/memory/file", "/memory/file.md"):
            page = await client.get(path, headers=bearer)
            assert page.status_code == 303 and "Ana Lima" not in page.text
        csrf = await sign_in(app, client, ben)
        for path in ("/memory/file", "/memory/file.md"):
            assert "Ana Lima" not in (await client.get(path)).text
        stolen = anas.replace("- My sister is Ana Lima <!--", "- My sister is nobody <!--")
        await client.post("/memory/file", data={"text": stolen, "csrf": csrf})
    assert "My sister is Ana Lima" in await active_facts(app, ana_id)
    assert "My sister is nobody" not in await active_facts(app, ana_id)


async def test_a_line_typed_without_its_dash_is_pointed_out_not_ignored(app: App) -> None:
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    typed = text.replace("## People\n", "## People\nMy brother is Rui\n")
    said = (await _apply(app, user_id, typed)).describe()
    assert "Not read" in said and "My brother is Rui" in said, said
    assert "What lifebot remembers" not in said and "end of the" not in said, said


async def test_a_file_saved_on_windows_comes_back_through_the_cli(app: App, tmp_path: Path) -> None:
    """Notepad's byte order mark and CRLF line ends, tabs, accents and emoji; and its UTF-16."""
    await _ana(app)
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    out = tmp_path / "MEMORY.md"
    code, _, err = await run_cli(
        "memory", "file", "--user", "ana", "-o", str(out), cwd=tmp_path, env=env
    )
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    edited = text.replace("## People\n", "## People\n-\tA minha irmã é a Ana 😀\t\n")
    out.write_bytes(edited.replace("\n", "\r\n").encode("utf-8-sig"))
    code, said, err = await run_cli(
        "memory", "file", "--user", "ana", "--apply", str(out), cwd=tmp_path, env=env
    )
    assert (code, said.strip()) == (0, "Added: A minha irmã é a Ana 😀"), err
    edited = text.replace("## Notes\n", "## Notes\n- O café é às 10h\n")
    out.write_bytes(edited.replace("\n", "\r\n").encode("utf-16"))
    code, said, err = await run_cli(
        "memory", "file", "--user", "ana", "--apply", str(out), cwd=tmp_path, env=env
    )
    assert code == 0 and said.startswith("Added: O café é às 10h\nKept"), err


async def test_applying_a_file_is_logged_by_counts_never_by_its_words(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """The operator sees that a file changed someone's memory; what it says stays private."""
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    text = text.replace("- My sister is Ana Lima <!--", "- My sister is Ana Costa <!--")
    text = text.replace("## Notes\n", "## Notes\n- My PIN is 4711\n")
    with caplog.at_level(logging.INFO):
        await _apply(app, user_id, text)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"memory file of user {user_id} applied: 1 added, 1 changed, 0 forgotten" in logged
    assert "4711" not in logged and "Ana Costa" not in logged and "Ana Lima" not in logged


async def test_a_fact_quoting_the_end_line_does_not_make_a_cut_file_whole(app: App) -> None:
    user_id = await _ana(app)
    quoted = "My notes app ends files with <!-- end of the lifebot memory file -->"
    assert (await app.memory.remember(user_id, quoted, category="people")).action == "added"
    text = await memory_file(app, user_id)
    cut = text[: text.index("## Notes")]  # the fact quoting the end line is above the cut
    report = await _apply(app, user_id, cut)
    assert report.removed == [] and report.cut_short, report.describe()


async def test_a_conflict_on_the_page_is_settled_by_saving_the_copy_again(app: App) -> None:
    """The page shows both versions and keeps the person's copy; saving it again (having
    seen the chat's newer words) keeps the file's words instead of the same conflict again."""
    user_id = await _ana(app)
    ana = await app.web.service.accounts.user(user_id)
    assert ana is not None
    async with client_for(app) as client:
        csrf = await sign_in(app, client, ana)
        stale = (await client.get("/memory/file.md")).text
        sister = await active_fact(app, user_id, "sister")
        await app.memory.keeper.replace(
            user_id, sister.id or 0, "My sister is Ana Lima Reis", "people", app.clock.now()
        )  # meanwhile, in chat
        mine = stale.replace("- My sister is Ana Lima <!--", "- My sister is Ana Costa <!--")
        clash = await client.post("/memory/file", data={"text": mine, "csrf": csrf})
        assert clash.status_code == 409 and "Save again" in clash.text
        box = html.unescape(clash.text.split('aria-label="MEMORY.md"', 1)[1].split(">", 1)[1])
        again = await client.post(
            "/memory/file", data={"text": box.split("</textarea>")[0], "csrf": csrf}
        )
        assert again.status_code == 303
    active = await active_facts(app, user_id)
    assert "My sister is Ana Costa" in active and "My sister is Ana Lima Reis" not in active


async def test_a_file_adding_hundreds_of_facts_is_refused_before_anything_changes(
    app: App,
) -> None:
    """Each new fact is checked against all the others (slow: 100 took 8 s here); a pasted
    list of thousands would hold the page for hours. It is refused whole, in plain words."""
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    many = "".join(f"- Thing {i} is stored in box {i}\n" for i in range(MAX_NEW_FACTS + 1))
    edited = text.replace("## Notes\n", f"## Notes\n{many}").replace("Ana Lima", "Ana Costa")
    started = time.monotonic()
    with pytest.raises(MemoryFileError, match=f"at most {MAX_NEW_FACTS}"):
        await _apply(app, user_id, edited)
    assert time.monotonic() - started < 2
    assert "My sister is Ana Lima" in await active_facts(app, user_id)  # nothing applied


async def test_a_newcomer_s_empty_file_handed_back_says_only_that_nothing_changed(
    app: App,
) -> None:
    user = await add_user(app, "rui", name="Rui")
    assert user.id is not None
    report = await _apply(app, user.id, await memory_file(app, user.id))
    assert report.describe() == "Nothing to change: the file says what I already remember."


async def test_a_written_date_in_the_future_cannot_forget_what_chat_learned_since(
    app: App,
) -> None:
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    await app.memory.remember(user_id, "Rui's birthday is on 4 May", category="events")
    future = re.sub(r"written \d{4}-", "written 2999-", text, count=1)
    with pytest.raises(MemoryFileError, match="future"):
        await _apply(app, user_id, future)
    assert "Rui's birthday is on 4 May" in await active_facts(app, user_id)


async def test_in_chat_a_long_file_comes_as_a_link_to_the_page(app: App) -> None:
    user = await add_user(app, "ana", name="Ana")
    assert user.id is not None
    async with app.db.session() as s:
        for i in range(80):
            await FactRepo(s).add(user.id, f"Box {i} in the attic holds the winter clothes")
    await app.dispatcher.handle(make_inbound("/memoryfile", sender="ana"))
    reply = channel(app).texts("ana")[-1]
    assert "too long for a chat message" in reply and "/memory/file" in reply, reply
    assert "winter clothes" not in reply


async def test_a_fact_reworded_in_the_file_keeps_the_message_it_was_learned_from(
    app: App,
) -> None:
    user = await add_user(app, "ana", name="Ana")
    assert user.id is not None
    await app.dispatcher.handle(make_inbound("/remember my sister is Rita", sender="ana"))
    async with app.db.session() as s:
        (learned,) = await FactRepo(s).active(user.id)
    assert learned.source_message_ids
    text = await memory_file(app, user.id)
    await _apply(
        app, user.id, text.replace("- my sister is Rita <!--", "- My sister is Rita Lima <!--")
    )
    async with app.db.session() as s:
        (now,) = await FactRepo(s).active(user.id)
    assert now.text == "My sister is Rita Lima"
    assert now.source_message_ids == learned.source_message_ids


async def test_old_words_on_a_new_line_beside_their_reworded_line_keep_both(app: App) -> None:
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    line = _line(text, "The spare key is under the blue pot")
    reworded = line.replace("The spare key is under the blue pot", "The car key is in the drawer")
    edited = text.replace(line, f"{reworded}\n- The spare key is under the blue pot")
    await _apply(app, user_id, edited)
    active = await active_facts(app, user_id)
    assert "The spare key is under the blue pot" in active
    assert "The car key is in the drawer" in active


async def test_a_fact_brought_back_after_the_file_was_written_stays(app: App) -> None:
    """Forgotten, then the file downloaded (without it), then 'undo' on the Facts page:
    handing that file back must not forget it again without a word."""
    user_id = await _ana(app)
    key = await active_fact(app, user_id, "spare key")
    await app.memory.keeper.forget(user_id, key.id or 0, app.clock.now())
    text = await memory_file(app, user_id)
    ana = await app.web.service.accounts.user(user_id)
    assert ana is not None
    assert await app.web.service.facts.restore_fact(ana, key.id or 0) is not None
    report = await _apply(app, user_id, text)
    assert report.removed == [], report.describe()
    assert "The spare key is under the blue pot" in await active_facts(app, user_id)


async def test_a_nul_character_in_the_file_is_dropped_not_a_crash(any_db_app: App) -> None:
    """PostgreSQL keeps no NUL in text; a file with one (a binary paste) still comes back."""
    app = any_db_app
    user_id = await _ana(app)
    text = await memory_file(app, user_id)
    report = await _apply(
        app, user_id, text.replace("## Notes\n", "## Notes\n- The gate\x00 code is 1234\n")
    )
    assert report.added == ["The gate code is 1234"], report.describe()
