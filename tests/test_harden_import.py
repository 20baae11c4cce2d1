"""Hardening (#18) item 7 and the import fuzz: no bad value aborts an import, nothing distinct
is dropped. Property: whatever the lines, no crash, every bad line is reported by number and
every good line is kept."""

from __future__ import annotations

import json
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.app.build import App
from bot.app.importer import ImportRecord, import_file, read_records
from bot.messages import Address
from storage.repos.messages import ConversationRepo, MessageRepo
from tests.support.app import add_user

GOOD = {"ts": "2024-03-01T10:00:00+00:00", "speaker": "Ben", "text": "hello"}


def _line(**over: object) -> str:
    return json.dumps({**GOOD, **over})


async def test_ids_that_restart_per_conversation_are_all_kept(
    any_db_app: App, tmp_path: Path
) -> None:
    user = await add_user(any_db_app, "ana")
    assert user.id is not None
    path = tmp_path / "chats.jsonl"
    path.write_text(
        "\n".join(
            _line(id=str(i), conversation=c, text=f"{c} message {i}")
            for c in ("ana", "ben")
            for i in (1, 2, 3)
        ),
        encoding="utf-8",
    )

    report = await import_file(any_db_app.db, user.id, path)
    again = await import_file(any_db_app.db, user.id, path)

    assert (report.added, report.bad) == (6, [])
    assert (again.added, again.duplicates) == (0, 6)


async def test_one_bad_value_never_aborts_the_import(any_db_app: App, tmp_path: Path) -> None:
    user = await add_user(any_db_app, "ana")
    assert user.id is not None
    lines = [
        _line(id="ok1"),
        '{"id": "inf", "ts": Infinity, "text": "x"}',
        _line(id="big", ts=1e20),
        _line(id="over", ts="9999-12-31T23:59:59-05:00"),
        '{"id": "sur", "ts": "2024-03-01T10:00:00+00:00", "text": "half \\ud83d emoji"}',
        _line(id="nul", text="a nul \u0000 inside"),
        _line(id="ok2"),
    ]
    path = tmp_path / "bad.jsonl"
    data = ("\ufeff" + "\n".join(lines[:4])).encode() + b"\n" + b'{"id": "bin", "text": "\xff"}'
    path.write_bytes(data + b"\n" + "\n".join(lines[4:]).encode())

    report = await import_file(any_db_app.db, user.id, path)

    bad = dict(report.bad)
    assert set(bad) == {"line 2", "line 3", "line 4", "line 5"}, report.bad
    assert "UTF-8" in bad["line 5"]
    assert report.added == 4  # ok1, the surrogate and NUL lines (cleaned), ok2


async def test_a_huge_telegram_date_is_one_bad_message(app: App, tmp_path: Path) -> None:
    user = await add_user(app, "ana")
    assert user.id is not None
    export = {
        "name": "Carlos",
        "id": 1,
        "messages": [
            {"id": 1, "type": "message", "date_unixtime": "99999999999999999999", "text": "a"},
            {"id": 2, "type": "message", "date_unixtime": "1704189900", "text": "b"},
        ],
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(export), encoding="utf-8")

    report = await import_file(app.db, user.id, path)

    assert report.added == 1 and [w for w, _ in report.bad] == ["message 1 of chat 'Carlos'"]


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
fields = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "ts": json_values | st.sampled_from(["2024-01-01T00:00:00", "9999-12-31T23:59:59-05:00"]),
        "speaker": json_values,
        "text": json_values,
        "conversation": json_values,
    },
)
lines = st.one_of(
    fields.map(json.dumps),
    st.text(max_size=60),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(lines, max_size=8))
def test_fuzz_the_line_parser_never_crashes_and_accounts_for_every_line(
    tmp_path: Path, raw_lines: list[str]
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes("\n".join(raw_lines).encode("utf-8", "surrogatepass"))
    seen = list(read_records(path, ZoneInfo("Europe/Lisbon")))
    numbered = [n for n, line in enumerate(path.read_bytes().split(b"\n"), 1) if line.strip()]
    where = [w for w, _ in seen]
    assert len(where) == len(set(where))
    for w, rec in seen:
        assert w.startswith("line ")
        if isinstance(rec, ImportRecord):
            rec.ts.astimezone(ZoneInfo("UTC"))  # storable
            assert rec.text.strip() and "\x00" not in rec.text
            rec.text.encode("utf-8")
        else:
            assert isinstance(rec, str) and rec
    assert [int(w.split()[1]) for w in where] == numbered  # one entry per line: counts add up


async def test_two_files_reusing_a_conversation_and_id_both_keep_their_messages(
    any_db_app: App, tmp_path: Path
) -> None:
    """Ids restart per export: ``id 1`` of this month's file is not ``id 1`` of last month's."""
    user = await add_user(any_db_app, "ana")
    assert user.id is not None
    march, april = tmp_path / "march.jsonl", tmp_path / "april.jsonl"
    march.write_text(_line(id="1", text="the boiler code is 4421") + "\n", encoding="utf-8")
    april.write_text(
        _line(id="1", ts="2024-04-01T09:00:00+00:00", text="the gate code is 7788")
        + "\n"
        + _line(id="2", ts="2024-04-01T09:05:00+00:00", text="bring the ladder")
        + "\n",
        encoding="utf-8",
    )

    first = await import_file(any_db_app.db, user.id, march)
    second = await import_file(any_db_app.db, user.id, april)
    again = await import_file(any_db_app.db, user.id, april)

    assert (first.added, second.added) == (1, 2)  # the old key dropped "the gate code"
    assert (again.added, again.duplicates) == (0, 2)  # the same file twice adds nothing
    async with any_db_app.db.session() as s:
        texts = await MessageRepo(s).texts_by_dedupe_key(
            user.id, [f"import:{user.id}:{r.key}" for r in _records(march) + _records(april)]
        )
    assert sorted(texts.values()) == [
        "bring the ladder",
        "the boiler code is 4421",
        "the gate code is 7788",
    ]


def _records(path: Path) -> list[ImportRecord]:
    return [r for _, r in read_records(path, ZoneInfo("UTC")) if isinstance(r, ImportRecord)]


async def test_messages_imported_under_the_old_key_are_not_imported_twice(
    app: App, tmp_path: Path
) -> None:
    """A file imported before content keys, imported again after: nothing doubles."""
    user = await add_user(app, "ana")
    assert user.id is not None
    path = tmp_path / "old.jsonl"
    path.write_text(_line(id="7", text="hello from before") + "\n", encoding="utf-8")
    [rec] = _records(path)
    async with app.db.session() as s:  # what the previous importer stored for this line
        conv = await ConversationRepo(s).get_or_create(
            user.id, Address("import", "jsonl", "default")
        )
        await MessageRepo(s).add_new_rows(
            [
                {
                    "user_id": user.id,
                    "conversation_id": conv.id,
                    "direction": "in",
                    "role": "user",
                    "channel": "import",
                    "account": "jsonl",
                    "chat_id": "default",
                    "sender_id": "Ben",
                    "external_id": "7",
                    "dedupe_key": f"import:{user.id}:jsonl:default:7",
                    "text": "hello from before",
                    "status": "stored",
                    "meta": {"import_id": "7"},
                    "created_at": rec.ts,
                }
            ]
        )

    report = await import_file(app.db, user.id, path)

    assert (report.added, report.duplicates) == (0, 1)


async def test_every_cleaned_or_refused_line_is_reported_and_the_counts_add_up(
    app: App, tmp_path: Path
) -> None:
    user = await add_user(app, "ana")
    assert user.id is not None
    path = tmp_path / "mixed.jsonl"
    lines = [
        _line(id="ok1"),  # 1
        _line(id="nul", text="a nul \u0000 inside"),  # 2
        "",  # 3: blank, not a record
        '{"id": "sur", "ts": "2024-03-01T10:00:00+00:00", "text": "half \\ud83d emoji"}',  # 4
        "not json",  # 5
        _line(id="x" * 250, text="a very long id"),  # 6
        _line(id="ok2", text="fine"),  # 7
    ]
    path.write_bytes("\n".join(lines).encode() + b'\n{"id": "bin", "text": "\xff"}\n')  # 8

    report = await import_file(app.db, user.id, path)

    assert report.lines == 7
    assert (report.read, len(report.cleaned), len(report.bad)) == (2, 3, 2)
    assert report.read + len(report.cleaned) + len(report.bad) == report.lines
    assert report.added == 5
    assert report.problems() == [
        "mixed.jsonl, line 2: kept after cleaning: NUL characters removed from 'text'",
        "mixed.jsonl, line 4: kept after cleaning: a broken character (lone surrogate) "
        "replaced in 'text'",
        "mixed.jsonl, line 5: refused: not valid JSON (Expecting value)",
        "mixed.jsonl, line 6: kept after cleaning: 'id' cut to 200 characters",
        "mixed.jsonl, line 8: refused: not valid UTF-8 (byte 24)",
    ]


async def test_a_telegram_export_accounts_for_every_message(app: App, tmp_path: Path) -> None:
    user = await add_user(app, "ana")
    assert user.id is not None
    export = {
        "name": "Carlos",
        "id": 1,
        "messages": [
            {"id": 1, "type": "service", "date_unixtime": "1704189900", "actor": "Carlos"},
            {"id": 2, "type": "message", "date_unixtime": "1704189900", "text": "a\u0000b"},
            {"id": 3, "type": "message", "date_unixtime": "1704189901", "text": ""},
            {"id": 4, "type": "message", "date_unixtime": "x", "text": "when?"},
            {"id": 5, "type": "message", "date_unixtime": "1704189902", "text": "plain"},
        ],
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(export), encoding="utf-8")

    report = await import_file(app.db, user.id, path)

    assert (report.lines, report.read, report.skipped, report.added) == (5, 1, 2, 2)
    assert report.problems() == [
        "result.json, message 2 of chat 'Carlos': kept after cleaning: NUL characters "
        "removed from 'text'",
        "result.json, message 4 of chat 'Carlos': refused: invalid literal for int() with "
        "base 10: 'x'",
    ]


async def test_a_chat_whose_messages_are_not_a_list_is_one_problem_and_the_rest_is_kept(
    app: App, tmp_path: Path
) -> None:
    """A full export with one chat's "messages" a number failed the whole import (TypeError)."""
    user = await add_user(app, "ana")
    assert user.id is not None
    good = {"id": 1, "type": "message", "date_unixtime": "1704189900", "text": "hello"}
    export = {
        "chats": {
            "list": [
                {"name": "Broken", "id": 7, "messages": 5},
                {"name": "Carlos", "id": 1, "messages": [good]},
            ]
        }
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(export), encoding="utf-8")

    report = await import_file(app.db, user.id, path)

    assert report.added == 1
    assert report.problems() == [
        "result.json, chat 'Broken': refused: its messages are not a list of messages"
    ]


async def test_a_field_under_another_tools_name_is_refused_with_the_name_to_use(
    app: App, tmp_path: Path
) -> None:
    # Exports of other tools call the time "time" or "timestamp" and the text "message": the
    # line is refused (a guessed field could mean something else), and the refusal says which
    # field of the line to rename.
    user = await add_user(app, "ana")
    assert user.id is not None
    path = tmp_path / "other.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"id": "a", "time": "2024-05-03T10:00:00Z", "text": "hi"}),
                json.dumps({"id": "b", "ts": "2024-05-03T10:00:00Z", "message": "hi"}),
                json.dumps({"id": "c", "text": "hi"}),
                _line(id="d"),
            ]
        )
    )

    report = await import_file(app.db, user.id, path)

    assert report.added == 1
    assert report.problems() == [
        "other.jsonl, line 1: refused: 'ts' is missing (this line has 'time': rename it to 'ts')",
        "other.jsonl, line 2: refused: 'text' is missing or empty (this line has 'message': "
        "rename it to 'text')",
        "other.jsonl, line 3: refused: 'ts' is missing",
    ]
