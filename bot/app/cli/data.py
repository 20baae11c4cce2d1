"""``lifebot export``, ``backup``, ``restore`` and ``users delete``: data, portable and safe.

Each walks every registered feature's tables and kinds of file (``storage.portable``,
``storage.backup``), so what one feature adds is in all of them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.runtime import find_user, run_with_app, settle_collector

if TYPE_CHECKING:
    from bot.app.build import App
    from bot.config import Settings


def register_data_cli(app: typer.Typer, users_app: typer.Typer) -> None:
    """Add ``export``, ``backup``, ``restore`` and ``users delete``."""
    app.command("export")(export)
    app.command("backup")(backup)
    app.command("restore")(restore)
    users_app.command("delete")(users_delete)


_SAID = {
    "message": ("message", "messages"),
    "fact": ("fact", "facts"),
    "episode": ("summary of a talk", "summaries of talks"),
    "journalentry": ("journal entry", "journal entries"),
    "reminder": ("reminder", "reminders"),
    "proposal": ("proposed event", "proposed events"),
    "contact": ("contact", "contacts"),
    "place": ("place", "places"),
    "stay": ("stay", "stays"),
    "locationpoint": ("location point", "location points"),
    "calendarevent": ("calendar event", "calendar events"),
    "calendarsource": ("calendar", "calendars"),
    "documentchunk": ("document passage", "document passages"),
    "device": ("device", "devices"),
    "devicesession": ("device session", "device sessions"),
}
"""What people call the rows of the tables they know, in the order a summary names them.

Any other table (tokens, cursors, counters, caches...) is counted as "other records": a
feature's new table needs no entry here to be exported, deleted or backed up."""


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _rows(counts: dict[str, int]) -> str:
    """``counts`` by table, in people's words: "40 messages, 2 facts and 9 other records"."""
    parts = [_plural(counts[t], *said) for t, said in _SAID.items() if counts.get(t)]
    others = sum(n for t, n in counts.items() if t not in _SAID and t != "user")
    if others:
        parts.append(_plural(others, "other record", "other records"))
    if not parts:
        return "no records"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _files(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "no stored files"
    return (
        f"{_plural(total, 'stored file', 'stored files')} ("
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + ")"
    )


def export(
    user: Annotated[str, typer.Option("--user", "-u", help="User id or name")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Zip to write (default lifebot-NAME.zip)")
    ] = None,
) -> None:
    """Write all of a user's data and files as a zip (re-import with `lifebot import`)."""
    import re

    async def go(application: App) -> None:
        who = await find_user(application, user)
        safe = re.sub(r"[^\w.-]+", "_", who.display_name) or str(who.id)
        target = out or Path(f"lifebot-{safe}.zip")
        try:
            done = await application.userdata.export(who.id or 0, target)
        except OSError as exc:
            # Disk full, a folder not writable: nothing half-written is left at ``target``.
            typer.echo(f"error: could not write {target}: {exc}. Nothing was written.", err=True)
            raise typer.Exit(1) from exc
        typer.echo(
            f"Wrote {target}: {_rows(done.rows)}; {_files(done.files)}; "
            f"{_plural(done.audio_files, 'audio file', 'audio files')}. It holds everything "
            "lifebot knows about them: keep it private."
        )

    run_with_app(go)


def _extras(settings: Settings) -> dict[str, Path]:
    """Files beside the database a backup keeps: the persona and the page's signing key."""
    return {"SOUL.md": settings.persona_path, "web_secret": settings.data_dir / "web_secret"}


def backup(
    to: Annotated[Path, typer.Option("--to", help="Folder to put the backup folder in")] = Path(
        "backups"
    ),
) -> None:
    """Copy the database (consistent, even while serving), every stored file and the spool."""
    from storage.backup import BackupError
    from storage.backup import backup as make_backup

    async def go(application: App) -> None:
        settings = application.settings
        try:
            done = await make_backup(
                db=application.db,
                files=application.files,
                target_root=to,
                now=application.clock.now(),
                spool_dir=settings.data_dir / "spool",
                extras=_extras(settings),
            )
        except BackupError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        database = "lifebot.db" if application.db.is_sqlite else f"{sum(done.rows.values())} rows"
        typer.echo(
            f"Backed up to {done.folder}: {database}, {_files(done.files)}, "
            f"{done.audio_files} spooled audio file(s); {done.bytes / 1e6:.1f} MB in "
            f"{done.seconds:.1f} s. Restore into an empty data folder and database with "
            f"`lifebot restore {done.folder}`."
        )

    run_with_app(go)


def restore(
    folder: Annotated[Path, typer.Argument(help="A folder `lifebot backup` made")],
) -> None:
    """Bring a backup back into an empty data folder and database (SQLite or PostgreSQL)."""
    from bot.app.cli.runtime import DATABASE_FIX, settings_or_exit
    from bot.errors import StorageError

    settings = settings_or_exit()
    try:
        settle_collector()  # a restore may be long: collect as usual
        message = asyncio.run(_restore(settings, folder))
    except StorageError as exc:
        typer.echo(f"error: {exc}. Fix: {DATABASE_FIX}", err=True)
        raise typer.Exit(1) from exc
    if message.startswith("error: "):
        typer.echo(message, err=True)
        raise typer.Exit(1)
    typer.echo(message)


async def _restore(settings: Settings, folder: Path) -> str:
    """Restore ``folder``; the line to print (starting with ``error: `` when refused)."""
    import time

    from bot.app.build import build_app, start_app
    from storage.backup import (
        BackupError,
        database_is_empty,
        folder_is_empty,
        read_manifest,
        restore_database,
        restore_extra,
        restore_files,
    )
    from storage.files.private import private_dir

    started = time.monotonic()
    try:
        manifest = await asyncio.to_thread(read_manifest, folder)
    except BackupError as exc:
        return f"error: {exc}"
    application = build_app(settings)
    spool = settings.data_dir / "spool"
    try:
        await asyncio.to_thread(private_dir, settings.data_dir)
        if not await database_is_empty(application.db):
            return (
                f"error: the database at {application.db.safe_url} already holds data; "
                "restore into an empty one (a new LIFEBOT_DATA_DIR, or a newly created "
                "PostgreSQL database)"
            )
        if not await folder_is_empty(application.files, spool):
            return (
                f"error: {settings.data_dir} already holds stored files or audio; restore "
                "into an empty data folder"
            )
        try:
            rows = await restore_database(application.db, folder, manifest)
        except BackupError as exc:
            return f"error: {exc}"
        await start_app(application)
        files, audio = await restore_files(application.files, folder, spool)
        extras = [
            name
            for name, target in _extras(settings).items()
            if await asyncio.to_thread(restore_extra, folder, name, target)
        ]
    finally:
        await application.close()
    database = "the database" + (f" ({sum(rows.values())} rows)" if rows else "")
    kept = f"; {', '.join(extras)}" if extras else ""
    return (
        f"Restored {folder} into {settings.data_dir}: {database}, {_files(files)}, "
        f"{audio} spooled audio file(s){kept}, in {time.monotonic() - started:.1f} s. "
        "Start lifebot as usual."
    )


def users_delete(
    user: Annotated[str, typer.Argument(help="User id or name")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
) -> None:
    """Delete a user and everything of theirs: messages, memory, files, audio, reminders."""

    async def go(application: App) -> None:
        who = await find_user(application, user)
        if not yes:
            ok = await asyncio.to_thread(
                typer.confirm,
                f"Delete {who.display_name} (user {who.id}) and everything of theirs, files "
                "and audio included? This cannot be undone (`lifebot export` first keeps a "
                "copy)",
                default=False,
            )
            if not ok:
                typer.echo("Nothing deleted.")
                raise typer.Exit(1)
        done = await application.userdata.delete(who.id or 0)
        typer.echo(
            f"Deleted {done.name} (user {done.user_id}): {_rows(done.rows)}; "
            f"{_files(done.files)}; {_plural(done.audio_files, 'audio file', 'audio files')}."
        )

    run_with_app(go)
