"""What every CLI command shares: settings, logging, building and closing the app, users.

Only the standard library and typer are imported at module level: ``lifebot --help`` must
answer at once, so each command imports what it needs when it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import typer

if TYPE_CHECKING:
    from bot.app.build import App
    from bot.app.memory_root import MemoryApp
    from bot.config import Settings
    from storage.db import Database
    from storage.models import User

T = TypeVar("T")


class HasDatabase(Protocol):
    """The whole app or its memory part: anything with the database."""

    @property
    def db(self) -> Database:
        """Storage."""
        ...


def group(help_text: str) -> typer.Typer:
    """A command group with plain help: rich (used for pretty help) takes 0.1 s to import."""
    return typer.Typer(
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )


def pause_collector() -> None:
    """Hold the cyclic garbage collector while a command imports and builds its app.

    Importing what ``serve`` runs (SQLAlchemy's and our models, FastAPI, python-telegram-bot)
    creates hundreds of thousands of objects and no garbage worth collecting; the collector
    still walked them all several times (about 0.25 s of CPU, a fifth of the imports). Paused
    in ``main`` only, so nothing changes for code that runs the commands in-process (tests).
    """
    gc.disable()


def settle_collector() -> None:
    """Freeze what the start-up made and collect again (a no-op unless paused).

    Frozen objects (modules, classes, the built app) are never walked again: every later
    full collection of a long-running ``serve`` is the cheaper for it.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def settings_or_exit() -> Settings:
    """Load settings, or print every problem and exit 2."""
    from bot.config import load_settings
    from bot.errors import ConfigError

    try:
        return load_settings()
    except ConfigError as exc:
        typer.echo("lifebot cannot start; fix these settings (environment or .env):", err=True)
        for problem in exc.problems:
            typer.echo(f"  - {problem}", err=True)
        raise typer.Exit(2) from exc


class _Part(Protocol):
    """What the runners start and close: the whole app or its memory part."""

    async def close(self) -> None:
        """Release everything."""
        ...


P = TypeVar("P", bound=_Part)


def _run(
    build: Callable[[], P],
    start: Callable[[P], Awaitable[None]],
    fn: Callable[[P], Awaitable[T]],
    *,
    settle: bool = True,
) -> T:
    """Build, start, run ``fn`` and close; storage and other BotErrors become one line, exit 1.

    ``settle``: resume the garbage collector once the app is started (``settle_collector``);
    False leaves that to ``fn``, which starts more (``serve``'s channels).
    """
    from bot.errors import BotError, NewerDatabaseError, StorageError

    async def main() -> T:
        try:
            part = build()
            try:
                await start(part)
                if settle:
                    settle_collector()
                return await fn(part)
            finally:
                await part.close()
        finally:
            settle_collector()  # however it ended: never left paused

    try:
        return asyncio.run(main())
    except StorageError as exc:
        # One plain line with the fix: never a traceback for a server that is down.
        fix = exc.fix if isinstance(exc, NewerDatabaseError) else DATABASE_FIX
        typer.echo(f"error: {exc}. Fix: {fix}", err=True)
        raise typer.Exit(1) from exc
    except BotError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def run_with_app(
    fn: Callable[[App], Awaitable[T]], settings: Settings | None = None, *, settle: bool = True
) -> T:
    """Build the app, migrate, run ``fn`` and close everything; BotErrors become exit 1.

    ``settle=False``: ``fn`` calls ``settle_collector`` itself once it has started what it runs.
    """
    from bot.app.build import build_app, start_app

    chosen = settings or settings_or_exit()
    return _run(lambda: build_app(chosen), start_app, fn, settle=settle)


def run_with_memory(fn: Callable[[MemoryApp], Awaitable[T]], *, embeds: bool = False) -> T:
    """Like ``run_with_app`` for read-only memory commands: storage and memory only.

    ``embeds``: the command embeds text (a search), so the local model starts loading at once.
    """
    settings = settings_or_exit()
    # The local embedding model loads in a thread while storage and memory are imported
    # below (the two together are most of a cold command's second). Imported in this order
    # on purpose: the embedders' module needs numpy only.
    from bot.agent.memory.embeddings import MiniLMEmbedder
    from bot.app.options import embedder_for

    embedder = embedder_for(settings)
    counter = None
    if embeds:
        # A search ends by fitting its hits into a token budget: the encoding loads meanwhile.
        from bot.agent.budget import load_in_background

        counter = load_in_background()
        if isinstance(embedder, MiniLMEmbedder):
            # One question to embed: loading fast beats running fast (see start_loading).
            embedder.start_loading(optimise=False)

    from bot.app.memory_root import MemoryApp
    from bot.clock import SystemClock

    try:
        return _run(lambda: MemoryApp.build(settings, SystemClock(), embedder), MemoryApp.start, fn)
    finally:
        if counter is not None:
            counter.join()  # never exit while a thread is inside tiktoken's native code


DATABASE_FIX = (
    "start the database server, or correct LIFEBOT_DATABASE_URL (leave it unset for SQLite "
    "in the data dir); `lifebot doctor` checks it"
)


MAX_ID = 2**31 - 1
"""The largest row id (``storage.models.MAX_ROW_ID``, copied so a command's start does not
import the models; ``tests/test_cli_ids.py`` holds the two equal)."""


def looks_like_id(text: str) -> bool:
    """Whether ``text`` can be a row id: ASCII digits, 1 to ``MAX_ID``."""
    return text.isascii() and text.isdigit() and 0 < int(text) <= MAX_ID


async def find_user(application: HasDatabase, who: str) -> User:
    """The user named ``who`` (an id or a display name, any case), or exit 2 saying why."""
    from storage.repos.users import UserRepo

    async with application.db.session() as s:
        repo = UserRepo(s)
        if looks_like_id(who):
            user = await repo.get(int(who))
            if user is not None:
                return user
        matches = [u for u in await repo.all() if u.display_name.lower() == who.lower()]
    if len(matches) != 1:
        if matches:
            why = f"several users are called {who!r}; use the id (`lifebot users` lists them)"
        else:
            why = f"no user {who!r}: `lifebot users` lists them, `lifebot users add NAME` adds one"
        typer.echo(why, err=True)
        raise typer.Exit(2)
    return matches[0]


async def wait_for(awaitable: Awaitable[object]) -> None:
    """Wait for ``awaitable`` or SIGINT/SIGTERM, whichever comes first."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def stop_on(sig: signal.Signals) -> None:
        # An operator reading the log after a stop should see why it stopped.
        logging.getLogger("lifebot.serve").info("stopping: %s received", sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        # Not available off the main thread or on some platforms; Ctrl-C still works there.
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop_on, sig)
    waiter = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, stopper):
            task.cancel()
        await asyncio.gather(waiter, stopper, return_exceptions=True)


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


M_ARENA_MAX = -8
"""glibc's mallopt parameter number for the arena cap (malloc.h)."""


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas (as ``MALLOC_ARENA_MAX`` would); True when applied.

    glibc gives each thread that allocates its own arena, up to eight per core, and keeps
    their freed pages: with the speech model, the embedder, aiosqlite and the executor's
    threads that was about 120 MB of a 561 MB process. Called before any of those threads
    start, so they share ``arenas``. 0 leaves glibc's default; other C libraries are left
    alone.
    """
    if arenas <= 0:
        return False
    import ctypes

    try:
        # The running process's own symbols (no ctypes.util.find_library: it runs ldconfig).
        libc = ctypes.CDLL(None)
        mallopt = getattr(libc, "mallopt", None)
        if mallopt is None:
            return False
        return bool(mallopt(M_ARENA_MAX, arenas))
    except OSError:
        return False
