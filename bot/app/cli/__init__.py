"""The ``lifebot`` command line: serve, chat, doctor, pairing, users.

Nothing heavy is imported here: each command imports what it uses when it runs, so
``lifebot --help`` answers at once (tests/test_cli_startup.py guards this).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.device import register_device_cli
from bot.app.cli.jobs import register_jobs_cli
from bot.app.cli.memory import register_memory_cli
from bot.app.cli.runtime import find_user, group, run_with_app, settings_or_exit, wait_for

if TYPE_CHECKING:
    from bot.app.build import App

__all__ = ["app", "find_user", "main", "run_with_app", "settings_or_exit"]

app = group("lifebot: a personal assistant that remembers your life.")
pairing_app = group("Approve strangers who asked to use lifebot.")
app.add_typer(pairing_app, name="pairing")
register_jobs_cli(app)  # lifebot jobs | briefing preview | calendar export
register_device_cli(app)  # lifebot device add|revoke|status, lifebot device-sim
register_memory_cli(app)  # lifebot memory search|facts|forget|reindex, lifebot import

NO_LLM_HINT = (
    "No language model is configured, so I can only run commands (/help). Set OPENAI_API_KEY "
    "for OpenAI, or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama (any OpenAI-compatible "
    "server works), then start lifebot again."
)


async def run_console(application: App) -> None:
    """Chat with the owner in this terminal until EOF, /quit or Ctrl-C."""
    from bot.adapters.console import ConsoleAdapter
    from bot.dispatch.identity import ensure_console_owner

    async with application.db.session() as s:
        await ensure_console_owner(s, application.settings.default_timezone)
    console = ConsoleAdapter(application.clock)
    application.add_channel(console)
    if console.interactive:
        console.write("lifebot console. Type a message, /help for commands, /quit to leave.\n")
    if not application.settings.llm_configured:
        console.write(f"note: {NO_LLM_HINT}\n")
    await console.start(application.dispatcher.handle)
    await wait_for(console.finished.wait())


async def run_serve(application: App) -> None:
    """Start every configured channel (the console when none is) and run until stopped."""
    from bot.app.build import start_channels

    log = logging.getLogger("lifebot.serve")
    if not application.settings.llm_configured:
        log.warning(NO_LLM_HINT)
    started = await start_channels(application)
    if not started:
        await run_console(application)
        return
    log.info("lifebot is running: %s", ", ".join(started))
    await wait_for(asyncio.Event().wait())


@app.command()
def serve() -> None:
    """Run lifebot: every configured channel, or the console when none is configured."""
    from bot.app.logs import setup_logging

    settings = settings_or_exit()
    setup_logging(settings, quiet_console=not (settings.telegram_enabled or settings.slack_enabled))
    run_with_app(run_serve, settings)


@app.command()
def chat() -> None:
    """Chat with lifebot in this terminal, as its owner."""
    from bot.app.logs import setup_logging

    settings = settings_or_exit()
    setup_logging(settings, quiet_console=True)
    run_with_app(run_console, settings)


@app.command()
def doctor() -> None:
    """Check configuration, database, LLM, model files and tokens; say how to fix problems."""
    from bot.app.doctor import run_doctor
    from bot.config import load_settings
    from bot.errors import ConfigError

    try:
        settings = load_settings()
    except ConfigError as exc:
        typer.echo("configuration: PROBLEMS")
        for problem in exc.problems:
            typer.echo(f"  - {problem}")
        raise typer.Exit(1) from exc
    ok = asyncio.run(run_doctor(settings, typer.echo))
    raise typer.Exit(0 if ok else 1)


@pairing_app.command("list")
def pairing_list() -> None:
    """List pending pairing requests."""
    from storage.repos.pairing import PairingRepo

    async def go(application: App) -> None:
        async with application.db.session() as s:
            pending = await PairingRepo(s).pending(application.clock.now())
        if not pending:
            typer.echo("No pending pairing requests.")
        for req in pending:
            who = req.display_name or req.sender_id
            typer.echo(
                f"{req.code}  {req.channel}  {who}  expires {req.expires_at:%Y-%m-%d %H:%M} UTC"
            )

    run_with_app(go)


@pairing_app.command("approve")
def pairing_approve(
    code: Annotated[str, typer.Argument(help="The 8-character pairing code")],
) -> None:
    """Approve a pairing code: the person who got it becomes a user."""
    from bot.dispatch.identity import approve

    async def go(application: App) -> None:
        async with application.db.session() as s:
            req = await approve(
                s, code, application.clock.now(), application.settings.default_timezone
            )
        if req is None:
            typer.echo(f"{code} is not a pending pairing code (it may have expired).", err=True)
            raise typer.Exit(1)
        typer.echo(
            f"Approved {req.display_name or req.sender_id} on {req.channel} (user {req.user_id})."
        )

    run_with_app(go)


users_app = typer.Typer(
    help="List, add and delete users.",
    add_completion=False,
    rich_markup_mode=None,
    invoke_without_command=True,
)
app.add_typer(users_app, name="users")


@users_app.callback()
def users(ctx: typer.Context) -> None:
    """List users, their linked channels and their schedule settings."""
    if ctx.invoked_subcommand is not None:
        return
    from bot.jobs.commands import settings_text
    from storage.repos.users import UserRepo

    async def go(application: App) -> None:
        async with application.db.session() as s:
            repo = UserRepo(s)
            everyone = await repo.all()
            if not everyone:
                typer.echo("No users yet: `lifebot users add NAME` adds one.")
            for user in everyone:
                idents = await repo.identities(user.id or 0)
                chans = ", ".join(
                    f"{i.channel}:{i.sender_id}{' (unreachable)' if i.unreachable_at else ''}"
                    for i in idents
                )
                owner = " owner" if user.is_owner else ""
                typer.echo(f"{user.id}  {user.display_name}{owner}  {chans}")
                typer.echo(f"    {settings_text(user)}")

    run_with_app(go)


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="A name to call them by, e.g. alice")],
    timezone: Annotated[
        str | None, typer.Option("--timezone", help="IANA zone; default LIFEBOT_TIMEZONE")
    ] = None,
) -> None:
    """Add a user (the first one becomes the owner, who also chats in the console)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from storage.repos.users import UserRepo

    if name.isdigit() or not name.strip():
        typer.echo("A user's name needs a letter (ids are numbers).", err=True)
        raise typer.Exit(2)

    async def go(application: App) -> None:
        zone = timezone or application.settings.default_timezone
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            typer.echo(f"{zone!r} is not a time zone (try Europe/Berlin).", err=True)
            raise typer.Exit(2) from exc
        async with application.db.session() as s:
            repo = UserRepo(s)
            everyone = await repo.all()
            if any(u.display_name.lower() == name.lower() for u in everyone):
                typer.echo(f"There is already a user called {name!r}.", err=True)
                raise typer.Exit(1)
            user = await repo.create(name.strip(), is_owner=not everyone, timezone=zone)
        role = " (owner: the console chats as them)" if user.is_owner else ""
        typer.echo(f"Added {user.display_name}, user {user.id}{role}.")

    run_with_app(go)


def main() -> None:
    """Entry point of the ``lifebot`` script."""
    app()
