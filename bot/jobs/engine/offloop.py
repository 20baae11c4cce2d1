"""APScheduler 3 with its synchronous job store kept off the event loop, through its public API.

APScheduler 3's SQLAlchemy job store is synchronous, and ``AsyncIOScheduler`` calls it on the
event loop. With SQLite that can freeze the whole process: the store waits for the write lock
while the coroutine holding that lock cannot run to release it. So the leader runs a
``BackgroundScheduler``: its own thread reads and writes the store and decides what is due,
and each due job (a plain function called in the scheduler's worker threads) hands its
coroutine to the event loop and waits for it there. The wait keeps APScheduler's
``max_instances`` and coalescing meaning what they say; nothing of APScheduler's private
internals is touched, so its upgrades cannot break this quietly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from datetime import UTC
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import BaseJobStore
from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger(__name__)


class OffLoopScheduler:
    """A ``BackgroundScheduler`` whose jobs run as coroutines on one event loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        jobstore: BaseJobStore,
        job_defaults: dict[str, Any],
        workers: int,
    ) -> None:
        self.loop = loop
        """Where job coroutines run."""
        self.closed = False
        """Set when stepping down: a run asked for from now on is dropped."""
        self._live: set[concurrent.futures.Future[Any]] = set()
        self._guard = threading.Lock()
        # One waiting thread per job that may run at once (each job has max_instances=1).
        self.scheduler = BackgroundScheduler(
            timezone=UTC,
            jobstores={"default": jobstore},
            executors={"default": ThreadPoolExecutor(max_workers=workers)},
            job_defaults=job_defaults,
        )
        """APScheduler itself: add, modify and look up jobs through it."""

    def run_on_loop(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Called by a due job in a scheduler thread: run ``make()`` on the loop, wait for it."""
        with self._guard:
            if self.closed:
                return None
            future = asyncio.run_coroutine_threadsafe(make(), self.loop)
            self._live.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            return None
        finally:
            with self._guard:
                self._live.discard(future)

    def start(self) -> None:
        """Start the scheduler's thread (blocking: it reads the store once; call in a thread)."""
        self.scheduler.start()

    def stop_taking_runs(self) -> None:
        """Drop every run asked for from now on, and stop the scheduler's thread (blocking).

        Returns once the thread has finished its current round of the store, so the store's
        engine may be disposed; runs already on the loop go on (see ``live``).
        """
        with self._guard:
            self.closed = True
        self.scheduler.shutdown(wait=False)

    def live(self) -> set[asyncio.Future[Any]]:
        """Job runs handed to the loop and not finished yet, as futures the loop can await."""
        with self._guard:
            return {asyncio.wrap_future(f, loop=self.loop) for f in self._live}

    def cancel_live(self) -> None:
        """Cancel the runs still going (their waiting threads return at once)."""
        with self._guard:
            for future in self._live:
                future.cancel()
