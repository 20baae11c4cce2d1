"""``lifebot export``, ``lifebot backup`` and ``lifebot users delete``: a user's data, portable."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.runtime import find_user, run_with_app

if TYPE_CHECKING:
    from bot.app.build import App


def register_data_cli(app: typer.Typer, users_app: typer.Typer) -> None:
    """Add ``export``, ``backup`` and ``users delete``."""
    app.command("export")(export)
    app.command("backup")(backup)
    users_app.command("delete")(users_delete)


def _rows(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {table}" for table, n in sorted(counts.items()) if n) or "no rows"


def export(
    user: Annotated[str, typer.Option("--user", "-u", help="User id or name")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Zip to write (default lifebot-NAME.zip)")
    ] = None,
) -> None:
    """Write all of a user's data as a zip of JSON files (re-import with `lifebot import`)."""
    import re

    from bot.app.portability import export_user

    async def go(application: App) -> None:
        who = await find_user(application, user)
        safe = re.sub(r"[^\w.-]+", "_", who.display_name) or str(who.id)
        target = out or Path(f"lifebot-{safe}.zip")
        done = await export_user(application, who.id or 0, target)
        typer.echo(
            f"Wrote {target}: {_rows(done.rows)}; {done.audio_files} audio file(s). It holds "
            "everything lifebot knows about them: keep it private."
        )

    run_with_app(go)


def backup(
    to: Annotated[Path, typer.Option("--to", help="Folder to put the backup folder in")] = Path(
        "backups"
    ),
) -> None:
    """Copy the database (consistent, even while serving), the audio spool and the persona."""
    from bot.app.portability import backup_sqlite

    async def go(application: App) -> None:
        url = application.settings.database_url
        if not url.startswith("sqlite"):
            typer.echo(
                "The database is PostgreSQL: back it up with `pg_dump` (e.g. pg_dump -Fc DBNAME "
                "> lifebot.dump); `lifebot backup` copies SQLite databases.",
                err=True,
            )
            raise typer.Exit(2)
        db_file = Path(url.split(":///", 1)[1])
        done = await asyncio.to_thread(
            backup_sqlite, db_file, application.settings.data_dir, to, application.clock.now()
        )
        typer.echo(
            f"Backed up to {done.folder}: lifebot.db and {done.audio_files} spooled audio "
            "file(s). Restore: stop lifebot, copy them into "
            f"{application.settings.data_dir}."
        )

    run_with_app(go)


def users_delete(
    user: Annotated[str, typer.Argument(help="User id or name")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
) -> None:
    """Delete a user and everything of theirs: messages, memory, audio, reminders, devices."""
    from bot.app.portability import delete_user

    async def go(application: App) -> None:
        who = await find_user(application, user)
        if not yes:
            ok = await asyncio.to_thread(
                typer.confirm,
                f"Delete {who.display_name} (user {who.id}) and everything of theirs, audio "
                "included? This cannot be undone (`lifebot export` first keeps a copy)",
                default=False,
            )
            if not ok:
                typer.echo("Nothing deleted.")
                raise typer.Exit(1)
        done = await delete_user(application, who.id or 0)
        typer.echo(
            f"Deleted {done.name} (user {done.user_id}): {_rows(done.rows)}; "
            f"{done.audio_files} audio file(s)."
        )

    run_with_app(go)
