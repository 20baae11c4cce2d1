"""The ``lifebot`` command line: serve, chat, doctor, pairing, users.

Nothing heavy is imported here: each command imports what it uses when it runs, so
``lifebot --help`` answers at once (tests/test_cli_startup.py guards this).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.data import register_data_cli
from bot.app.cli.device import register_device_cli
from bot.app.cli.jobs import register_jobs_cli
from bot.app.cli.journal import register_journal_cli
from bot.app.cli.mcp import register_mcp_cli
from bot.app.cli.memory import register_memory_cli
from bot.app.cli.runtime import (
    find_user,
    group,
    limit_malloc_arenas,
    pause_collector,
    raise_open_file_limit,
    run_with_app,
    settings_or_exit,
    settle_collector,
    wait_for,
)
from bot.app.cli.web import register_web_cli

if TYPE_CHECKING:
    from bot.app.build import App
    from bot.config import Settings

__all__ = ["app", "find_user", "main", "run_with_app", "settings_or_exit"]

app = group("lifebot: a personal assistant that remembers your life.")
pairing_app = group("Approve strangers who asked to use lifebot.")
app.add_typer(pairing_app, name="pairing")
register_jobs_cli(app)  # lifebot jobs | briefing preview | calendar export
register_device_cli(app)  # lifebot device add|revoke|status, lifebot device-sim
register_memory_cli(app)  # lifebot memory search|facts|forget|reindex, lifebot import
register_journal_cli(app)  # lifebot journal rescore
register_web_cli(app)  # lifebot web login --user U
register_mcp_cli(app)  # lifebot mcp serve|list

NO_LLM_HINT = (
    "No language model is configured, so I can only run commands (/help). Set OPENAI_API_KEY "
    "for OpenAI, or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama (any OpenAI-compatible "
    "server works), then start lifebot again."
)


async def run_console(
    application: App, *, with_jobs: bool = False, as_user: str | None = None
) -> bool:
    """Chat in this terminal until EOF, /quit or Ctrl-C; True after /quit.

    The console chats as ``as_user`` (a name or id) when given, else as whoever it chatted
    as last (the owner at first). ``with_jobs`` starts memory's background pass and the
    scheduled jobs too, with the console as a channel, so reminders, briefings and proposals
    arrive while you chat.
    """
    from bot.adapters.console import ConsoleAdapter
    from bot.dispatch.identity import ensure_console_owner

    chosen = await find_user(application, as_user) if as_user is not None else None
    async with application.db.session() as s:
        who = await ensure_console_owner(s, application.settings.default_timezone, chosen)
    console = ConsoleAdapter(application.clock)
    application.add_channel(console)
    if with_jobs:
        await application.mcp.start_clients()  # the configured MCP servers' tools
        application.memory.start()
        if application.settings.jobs_enabled:
            await application.jobs.service.start()
        await application.presence.start("chat")  # seen on the owner's page like a serve process
    if console.interactive:
        console.write(
            f"lifebot console, chatting as {who.display_name} (user {who.id}; "
            "`lifebot chat --user NAME` chats as someone else). Type a message, /help for "
            "commands, /quit to leave.\n"
        )
    if not application.settings.llm_configured:
        console.write(f"note: {NO_LLM_HINT}\n")
    await console.start(application.dispatcher.handle)
    await wait_for(console.finished.wait())
    return console.quit_asked


def where(settings: Settings, channel: str) -> str:
    """Where a started channel listens or what it connects to, in a few words."""
    if channel == "telegram":
        hook = settings.telegram_webhook_url
        return f"telegram (webhook {hook})" if hook else "telegram (long polling)"
    if channel == "slack":
        if settings.slack_mode == "http":
            host, port = settings.slack_http_host, settings.slack_http_port
            return f"slack (HTTP on http://{host}:{port}{settings.slack_http_path})"
        return "slack (Socket Mode)"
    if channel == "device":
        return f"pendant (ws://{settings.device_host}:{settings.device_port}/v1/device)"
    if channel == "wyoming":
        return f"Home Assistant (tcp://{settings.wyoming_host}:{settings.wyoming_port})"
    return channel


def _web_page(application: App) -> str | None:
    """Where the web page listens, when this process serves it."""
    if not application.settings.web_enabled:
        return None
    server = application.web.server
    return f"web page (http://{server.host}:{server.bound_port})"


async def run_serve(application: App, logfile: Path | None = None) -> None:
    """Start every configured channel (the console when none is) and run until stopped."""
    from bot.app.accept_log import throttle_accept_errors
    from bot.app.build import start_channels

    throttle_accept_errors()  # a process out of descriptors logs a count, not tracebacks
    settings = application.settings
    log = logging.getLogger("lifebot.serve")
    if not settings.llm_configured:
        log.warning(NO_LLM_HINT)
    started = await start_channels(application)
    settle_collector()  # everything serve runs is imported and started
    jobs = "on" if settings.jobs_enabled else "off (LIFEBOT_JOBS_ENABLED=false)"
    page = _web_page(application)
    if not started:
        typer.echo(
            f"lifebot: no chat channel is configured, so you chat here"
            f"{f' (and on the {page})' if page else ''}. Database "
            f"{application.db.safe_url}; scheduled jobs {jobs}; logs in "
            f"{settings.log_file or _console_log_file(settings)}.",
            err=True,
        )
        if await run_console(application) or page is None:
            return  # /quit, or nothing else to serve
        # The input ended (a container's stdin, a pipe): the page and its webhooks stay up.
        typer.echo(
            f"lifebot: the terminal's input ended; still serving the {page}. Ctrl-C or "
            "SIGTERM stops it.",
            err=True,
        )
        await wait_for(asyncio.Event().wait())
        return
    # Said whatever the log level: the operator must see what runs and where.
    serving = [where(settings, c) for c in started] + ([page] if page else [])
    typer.echo(
        f"lifebot is running: {', '.join(serving)}. "
        f"Database {application.db.safe_url}; scheduled jobs {jobs}"
        f"{f'; logs in {logfile}' if logfile else ''}. Ctrl-C stops it "
        "(`lifebot chat` talks to it from a terminal).",
        err=True,
    )
    log.info("lifebot is running: %s", ", ".join(started))
    await wait_for(asyncio.Event().wait())


def _console_log_file(settings: Settings) -> Path:
    return settings.data_dir / "lifebot.log"


@app.command()
def serve() -> None:
    """Run lifebot: every configured channel, or the console when none is configured."""
    from bot.app.logs import setup_logging

    settings = settings_or_exit()
    console_only = not (
        settings.telegram_enabled or settings.slack_enabled or settings.device_enabled
    )
    # The console owns the terminal when no channel is set: logs go to a file then (a device
    # added later may still start; its lines then go to the file too).
    logfile = setup_logging(settings, to_file=_console_log_file(settings) if console_only else None)
    raise_open_file_limit()
    limit_malloc_arenas(settings.malloc_arenas)
    run_with_app(lambda application: run_serve(application, logfile), settings, settle=False)


@app.command()
def chat(
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", help="Chat as this user (name or id); default: as last time"),
    ] = None,
) -> None:
    """Chat with lifebot in this terminal (reminders arrive here too).

    It chats as the owner at first; --user chats as another user from then on.
    """
    from bot.app.logs import setup_logging

    settings = settings_or_exit()
    logfile = setup_logging(settings, to_file=_console_log_file(settings))
    if logfile is not None and sys.stdin.isatty():
        typer.echo(f"(logs go to {logfile})", err=True)
    run_with_app(
        lambda application: run_console(application, with_jobs=True, as_user=user), settings
    )


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    fix: Annotated[
        bool, typer.Option("--fix", help="Repair what can be repaired, saying each change")
    ] = False,
    migrate: Annotated[
        bool, typer.Option("--migrate", help="With --fix: apply pending database migrations")
    ] = False,
) -> None:
    """Check configuration, database, models, ports and tokens; say how to fix problems.

    Without --fix it changes nothing: pending database migrations are counted, not applied.
    --fix creates the data folder, makes folders 0700 and files 0600, and with --migrate
    applies pending migrations; each change is printed as it is made.
    """
    from bot.app.doctor import FixOptions, collect_fixed, healthy, run_doctor
    from bot.app.doctor import as_json as report_json
    from bot.config import load_settings
    from bot.errors import ConfigError

    try:
        settings = load_settings()
    except ConfigError as exc:
        if as_json:
            problems = [{"name": "configuration", "status": "PROBLEM", "detail": p, "fix": ""}
                        for p in exc.problems]  # fmt: skip
            typer.echo(json.dumps({"ok": False, "checks": problems}, indent=2))
        else:
            typer.echo("configuration: PROBLEMS")
            for problem in exc.problems:
                typer.echo(f"  - {problem}")
        raise typer.Exit(1) from exc
    options = FixOptions(fix=fix or migrate, migrate=migrate)
    if as_json:
        repairs: list[str] = []
        checks = asyncio.run(collect_fixed(settings, options, repairs.append))
        typer.echo(report_json(checks, repairs if options.fix else None))
        raise typer.Exit(0 if healthy(checks) else 1)
    ok = asyncio.run(run_doctor(settings, typer.echo, options))
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
register_data_cli(app, users_app)  # lifebot export, backup, users delete


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
    from bot.clock import is_zone_name
    from storage.repos.users import UserRepo

    if name.isdigit() or not name.strip():
        typer.echo("A user's name needs a letter (ids are numbers).", err=True)
        raise typer.Exit(2)

    async def go(application: App) -> None:
        zone = timezone or application.settings.default_timezone
        if not is_zone_name(zone):
            typer.echo(f"{zone[:64]!r} is not a time zone (try Europe/Berlin).", err=True)
            raise typer.Exit(2)
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
    # Whatever any library creates on our behalf is the owner's alone too (lifebot's own
    # folders and files are made 0700/0600 explicitly; this covers the rest).
    os.umask(0o077)
    pause_collector()  # until the command's app is built and started (settle_collector)
    app()
