"""``lifebot import location FILE --user U``: a location history file into the user's stays."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from bot.app.cli.runtime import find_user, run_with_app

if TYPE_CHECKING:
    from bot.app.build import App


def import_location(path: Path, user: str) -> None:
    """Import GPX, OwnTracks Recorder or Google Timeline history; stays are found as live."""

    async def go(app: App) -> None:
        from bot.location.history import HistoryFileError, read_history
        from bot.location.service import LocationOff

        who = await find_user(app, user)
        assert who.id is not None
        try:
            history = await asyncio.to_thread(read_history, path, app.clock.now())
        except HistoryFileError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        for where, why in history.bad:
            typer.echo(f"skipped {path.name} {where}: {why}", err=True)
        try:
            new = await app.location.import_history(who.id, history.fixes, history.kind)
        except LocationOff:
            typer.echo(
                f"Location history is off for {who.display_name}: they send /location on to "
                "lifebot first (nothing was imported).",
                err=True,
            )
            raise typer.Exit(1) from None
        if not history.fixes:
            print(f"No points in {path.name} ({len(history.bad)} skipped).")
            return
        first = min(f.ts for f in history.fixes)
        last = max(f.ts for f in history.fixes)
        stays = await app.location.stays(who.id, first, last + timedelta(seconds=1))
        retention = app.settings.location_retention_days
        print(
            f"Imported {new} point{'' if new == 1 else 's'} from {path.name} ({history.kind}; "
            f"{len(history.fixes) - new} already there, {len(history.bad)} skipped): "
            f"{len(stays)} stay{'' if len(stays) == 1 else 's'} between {first:%Y-%m-%d} and "
            f"{last:%Y-%m-%d}. Raw points "
            f"older than {retention:g} days are deleted at the next hourly clean-up; the "
            "stays are kept."
        )

    run_with_app(go)
