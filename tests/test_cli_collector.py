"""A command holds Python's garbage collector while it imports and builds its app (about a
fifth of a start's CPU: ``serve`` 1.08 -> 0.87 s), and never does its work with it held."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from bot.app.build import App
from bot.app.cli.runtime import pause_collector, run_with_app
from tests.support.app import make_settings


@pytest.fixture
def paused() -> Iterator[None]:
    """The collector held as ``lifebot``'s ``main`` holds it; this worker's own state after."""
    pause_collector()
    try:
        yield
    finally:
        gc.unfreeze()  # what a command froze is this test worker's: let it go again
        gc.enable()


def test_a_command_does_its_work_with_the_collector_on(paused: None, tmp_path: Path) -> None:
    during: list[bool] = []

    async def work(_application: App) -> int:
        during.append(gc.isenabled())
        return 0

    run_with_app(work, make_settings(tmp_path))
    after = gc.isenabled()
    assert during == [True]
    assert after


def test_a_command_whose_start_fails_leaves_the_collector_on(paused: None, tmp_path: Path) -> None:
    async def never(_application: App) -> None:
        raise AssertionError("the app cannot start without its database")

    unreachable = make_settings(tmp_path, database_url_setting="postgresql://127.0.0.1:9/none")
    with pytest.raises(typer.Exit):
        run_with_app(never, unreachable)
    assert gc.isenabled()
