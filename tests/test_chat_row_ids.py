"""Every chat command that takes a row id answers an id out of range in plain words.

An id no row can have (more digits than a 64-bit integer holds, negative, zero, another
script's digits) once ended the command in an overflow or a ValueError, and the person got
"Sorry, something went wrong on my side". Each command now reads its id with the one shared
parser (``bot.chat.row_id``) and answers with its usage line.
"""

from __future__ import annotations

import logging

import pytest

from bot.app.build import App
from bot.chat import row_id
from bot.dispatch.commands import Commands
from tests.support.app import add_user
from tests.support.builders import make_inbound

ID_LINES = (
    "/forget {id}",
    "/reminders cancel {id}",
    "/proposal yes {id}",
    "/proposal no {id}",
    "/proposal rename {id} Climbing",
    "/calendar remove {id}",
    "/contact del {id}",
    "/contact yes {id}",
    "/contact no {id}",
    "/journal edit {id} a better day after all",
    "/task done {id}",
    "/retry {id}",
    "/answer {id} 0",
    "/place name {id} climbing hall",
)
"""Every command line that carries a row id (the test below checks none is missing)."""

BAD_IDS = (
    "99999999999999999999",  # more than a 64-bit integer holds
    "9223372036854775808",  # one more than the largest
    "2147483648",  # one more than an INTEGER id column holds
    "#99999999999999999999",
    "-1",
    "-99999999999999999999",
    "0",
    "²",  # a digit to str.isdigit, not to int()
    "١٢",  # Arabic-Indic twelve
    "1e3",
    "0x10",
)


async def test_every_command_taking_an_id_answers_an_id_out_of_range_plainly(
    any_db_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    app = any_db_app
    await add_user(app, "ana")
    caplog.set_level(logging.ERROR)
    commands = app.dispatcher.commands
    assert isinstance(commands, Commands)
    named = {line.split()[0].lstrip("/") for line in ID_LINES}
    with_id = {name for name, help_text in commands.menu() if "ID" in help_text}
    assert with_id <= named, f"commands taking an ID missing from ID_LINES: {with_id - named}"
    for line in ID_LINES:
        for bad in (*BAD_IDS, "2147483647"):  # the last: the largest id, of no row
            said = line.format(id=bad)
            reply = (await app.dispatcher.handle(make_inbound(said, sender="ana"))).reply or ""
            assert reply.strip(), f"{said!r} got no answer"
            assert "went wrong" not in reply and "Traceback" not in reply, (said, reply)
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR], said
    # The commands still work after all that.
    added = (await app.dispatcher.handle(make_inbound("/task add buy milk", sender="ana"))).reply
    assert added is not None and added.startswith("Added task #")
    ident = added.split("#")[1].split(":")[0]
    done = await app.dispatcher.handle(make_inbound(f"/task done #{ident}", sender="ana"))
    assert done.reply == "Done: buy milk"


def test_the_shared_parser_reads_only_ids_a_row_can_have() -> None:
    assert row_id("12") == 12
    assert row_id(" #12 ") == 12
    assert row_id("2147483647") == 2**31 - 1
    for bad in (*BAD_IDS, "", "#", "12a", "1 2", "+5"):
        assert row_id(bad) is None, bad
