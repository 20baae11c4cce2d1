"""The ``lifebot`` command line: serve, chat, doctor, pairing, users."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer

from bot.app import logsafe
from bot.app.build import App, build_app, start_app, start_channels
from bot.app.cli.device import register_device_cli
from bot.app.cli.jobs import register_jobs_cli
from bot.config import Settings, load_settings
from bot.errors import BotError, ConfigError

T = TypeVar("T")

app = typer.Typer(
    help="lifebot: a personal assistant that remembers your life.",
    no_args_is_help=True,
    add_completion=False,
)
pairing_app = typer.Typer(help="Approve strangers who asked to use lifebot.", no_args_is_help=True)
app.add_typer(pairing_app, name="pairing")
register_jobs_cli(app)  # lifebot jobs | briefing preview | calendar export
register_device_cli(app)  # lifebot device add|revoke|status, lifebot device-sim

NO_LLM_HINT = (
    "No language model is configured, so I can only run commands (/help). Set OPENAI_API_KEY "
    "for OpenAI, or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama (any OpenAI-compatible "
    "server works), then start lifebot again."
)


def settings_or_exit() -> Settings:
    """Load settings, or print every problem and exit 2."""
    try:
        return load_settings()
    except ConfigError as exc:
        typer.echo("lifebot cannot start; fix these settings (environment or .env):", err=True)
        for problem in exc.problems:
            typer.echo(f"  - {problem}", err=True)
        raise typer.Exit(2) from exc


def setup_logging(settings: Settings, *, quiet_console: bool = False) -> None:
    """Log to stderr; keep chat output clean when the console channel is in use."""
    level = logging.WARNING if quiet_console else getattr(logging, settings.log_level.upper(), 20)
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpcore", "openai", "aiosqlite", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    logsafe.install(settings)  # tokens and secrets never reach a log line, at any level


def raise_open_file_limit() -> None:
    """Lift the soft limit on open files to the hard one, where the system allows it.

    Each pendant, chat connection and database file holds descriptors; the common soft limit
    of 1,024 let a flood of sockets starve every channel ("Too many open files").
    """
    try:
        import resource  # POSIX only

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        if soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            logging.getLogger("lifebot.serve").info("open file limit raised to %d", target)
    except (ImportError, ValueError, OSError) as exc:
        logging.getLogger("lifebot.serve").warning("could not raise the open file limit: %s", exc)


def run_with_app(fn: Callable[[App], Awaitable[T]]) -> T:
    """Build the app, migrate, run ``fn`` and close everything; BotErrors become exit 1."""
    settings = settings_or_exit()

    async def main() -> T:
        application = build_app(settings)
        try:
            await start_app(application)
            return await fn(application)
        finally:
            await application.close()

    try:
        return asyncio.run(main())
    except BotError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


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
    await _wait_for(console.finished.wait())


async def _wait_for(awaitable: Awaitable[object]) -> None:
    """Wait for ``awaitable`` or SIGINT/SIGTERM, whichever comes first."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Not available off the main thread or on some platforms; Ctrl-C still works there.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, stopper):
            task.cancel()
        await asyncio.gather(waiter, stopper, return_exceptions=True)


async def run_serve(application: App) -> None:
    """Start every configured channel (the console when none is) and run until stopped."""
    log = logging.getLogger("lifebot.serve")
    if not application.settings.llm_configured:
        log.warning(NO_LLM_HINT)
    started = await start_channels(application)
    if not started:
        await run_console(application)
        return
    log.info("lifebot is running: %s", ", ".join(started))
    await _wait_for(asyncio.Event().wait())


@app.command()
def serve() -> None:
    """Run lifebot: every configured channel, or the console when none is configured."""
    settings = settings_or_exit()
    # Only when the console itself is the channel do logs stay quiet (they would mix with chat).
    channels = settings.telegram_enabled or settings.slack_enabled or settings.device_enabled
    setup_logging(settings, quiet_console=not channels)
    raise_open_file_limit()
    run_with_app(run_serve)


@app.command()
def chat() -> None:
    """Chat with lifebot in this terminal, as its owner."""
    setup_logging(settings_or_exit(), quiet_console=True)
    run_with_app(run_console)


@app.command()
def doctor() -> None:
    """Check configuration, database, LLM, model files and tokens; say how to fix problems."""
    from bot.app.doctor import run_doctor

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


@app.command()
def users() -> None:
    """List users, their linked channels and their schedule settings."""
    from bot.jobs.commands import settings_text
    from storage.repos.users import UserRepo

    async def go(application: App) -> None:
        async with application.db.session() as s:
            repo = UserRepo(s)
            for user in await repo.all():
                idents = await repo.identities(user.id or 0)
                chans = ", ".join(
                    f"{i.channel}:{i.sender_id}{' (unreachable)' if i.unreachable_at else ''}"
                    for i in idents
                )
                owner = " owner" if user.is_owner else ""
                typer.echo(f"{user.id}  {user.display_name}{owner}  {chans}")
                typer.echo(f"    {settings_text(user)}")

    run_with_app(go)


def _add_memory_commands() -> None:
    from bot.app.cli.memory import import_command, memory_app

    app.add_typer(memory_app, name="memory")
    app.command("import")(import_command)


_add_memory_commands()


def main() -> None:
    """Entry point of the ``lifebot`` script."""
    app()
