"""Ids and names on the command line that no row can have: a sentence, never a traceback.

An operator types what they see, and sometimes what they did not mean ("2147483648", a
pasted "²", twenty nines). Every command that takes an id or a user checks it the way the web
page and chat do (``storage.models.MAX_ROW_ID``), and a contract test walks the command tree
so a new command's number cannot skip the range.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
import typer.main

from bot.app.cli import app as cli_app
from bot.app.cli.runtime import MAX_ID
from storage.models import MAX_ROW_ID
from tests.support.cli import run_cli

BAD_IDS = ("2147483648", "99999999999999999999", "²", "-1", "0")


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every command of the tree, by its words (typer's own click: walked by duck type)."""
    found: list[tuple[str, Any]] = []
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if hasattr(command, "commands"):
            found.extend(_commands(command, path + " "))
        else:
            found.append((path, command))
    return found


def test_every_number_a_command_takes_is_range_checked() -> None:
    unchecked = []
    numbers = 0
    for path, command in _commands(typer.main.get_command(cli_app)):
        for param in command.params:
            annotation = param.type_descriptor.annotation
            if not {annotation, *get_args(annotation)} & {int, float}:
                continue
            numbers += 1
            if param.min is None or param.max is None:
                unchecked.append(f"lifebot {path} {param.name}")
            elif annotation is int and param.name.endswith("_id"):
                assert param.max <= MAX_ROW_ID, f"lifebot {path} {param.name}"
    assert numbers >= 3
    assert not unchecked, f"numbers read without a range: {unchecked}"


def test_the_command_lines_id_bound_is_the_databases() -> None:
    assert MAX_ID == MAX_ROW_ID


@pytest.mark.parametrize(
    "command",
    [
        ["export", "--user"],
        ["users", "delete"],
        ["memory", "facts", "--user"],
        ["calendar", "export", "--user"],
        ["web", "login", "--user"],
        ["device", "add", "pendant", "--user"],
        ["memory", "forget"],
        ["jobs", "retry"],
    ],
)
async def test_an_id_no_row_can_have_is_answered_in_words(
    tmp_path: Path, command: list[str]
) -> None:
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "data")}
    code, _, err = await run_cli("users", "add", "Ann", cwd=tmp_path, env=env)
    assert code == 0, err
    for bad in BAD_IDS:
        code, out, err = await run_cli(*command, bad, cwd=tmp_path, env=env)
        assert code != 0, (command, bad, out)
        assert "Traceback" not in err, (command, bad, err)
        # The range ("Invalid value ... 1<=x<=2147483647"), "no user '...'", or for "-1"
        # the command line's own "No such option".
        said = ("Invalid value", "no user", "No such option")
        assert any(words in err for words in said), (command, bad, err)
