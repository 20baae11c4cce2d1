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
    assert {int(w.split()[1]) for w in where} <= set(numbered)
