"""What `lifebot --help` and each group's --help list: every command's line reads whole."""

from __future__ import annotations

from typing import Any


def test_every_command_listed_in_help_has_a_whole_first_sentence() -> None:
    """`lifebot journal --help` listed rescore as "Score every journal entry again (e.g.":
    click ends a listing's line at the first ". ", so "e.g. " cut it mid-parenthesis."""
    import typer

    from bot.app.cli import app

    def walk(cmd: Any, ctx: Any, path: str) -> list[tuple[str, str]]:
        found = [(path, cmd.get_short_help_str(limit=1000))]
        for name in cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else []:
            sub = cmd.get_command(ctx, name)  # typer's own click: duck-typed, not isinstance
            found += walk(sub, sub.context_class(sub, parent=ctx, info_name=name), f"{path} {name}")
        return found

    root = typer.main.get_command(app)
    listed = walk(root, root.context_class(root, info_name="lifebot"), "lifebot")
    assert len(listed) > 30
    cut = [(p, h) for p, h in listed if h.count("(") != h.count(")")]
    assert not cut, cut
