"""``lifebot import journal DIR`` and ``lifebot journal ...`` (rescore)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.memory import UserOpt, _progress
from bot.app.cli.runtime import find_user as _user
from bot.app.cli.runtime import group, run_with_app

if TYPE_CHECKING:
    from bot.app.build import App

journal_app = group("The journal: entries, scores, summaries.")


def register_journal_cli(app: typer.Typer) -> None:
    """Add ``journal ...`` to the lifebot CLI (``import journal DIR`` lives with import)."""
    app.add_typer(journal_app, name="journal")


def import_journal(folder: Path, user: str) -> None:
    """Import a folder of dated Markdown or text files as journal entries (idempotent)."""

    async def go(app: App) -> None:
        from bot.agent.journal.files import JournalDirError, journal_files

        who = await _user(app, user)
        try:
            total = len(journal_files(folder))
            with _progress("importing") as bar:
                task = bar.add_task("journal", total=total)
                report = await app.journal.import_dir(
                    who.id or 0,
                    folder,
                    timezone=who.timezone,
                    progress=lambda n: bar.advance(task, n),
                )
        except JournalDirError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        for name, why in report.bad:
            typer.echo(f"skipped {name}: {why}", err=True)
        print(
            f"Imported {report.added} journal entries ({report.edited} changed and scored "
            f"again, {report.unchanged} already there, {len(report.bad)} bad files skipped)."
        )

    run_with_app(go)


@journal_app.command("rescore")
def rescore(
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user")] = None,
) -> None:
    """Score every journal entry again (after configuring or changing the LLM, for one)."""

    async def go(app: App) -> None:
        who = await _user(app, user) if user else None
        with _progress("scoring") as bar:
            task = bar.add_task("rescore", total=None)
            count = await app.journal.rescore(
                who.id if who else None, progress=lambda n: bar.advance(task, n)
            )
        print(f"Scored {count} journal entries again; their summaries will be rewritten.")

    run_with_app(go)


__all__ = ["UserOpt", "import_journal", "journal_app", "register_journal_cli"]
