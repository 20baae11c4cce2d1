"""APScheduler 3 with its synchronous job store kept off the event loop.

APScheduler 3's SQLAlchemy job store is synchronous and ``AsyncIOScheduler`` calls it on the
event loop. With SQLite that can freeze the whole process: the store waits for the write lock
while the coroutine holding that lock cannot run to release it. Here the scheduler's job
processing runs in one worker thread; jobs are still started as coroutines on the loop.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.schedulers.asyncio import AsyncIOScheduler, run_in_event_loop

log = logging.getLogger(__name__)


class LoopExecutor(AsyncIOExecutor):  # type: ignore[misc]  # apscheduler ships no types
    """Starts job coroutines on the event loop even when asked from the scheduler's thread."""

    closed = False

    def _do_submit_job(self, job: Any, run_times: Any) -> None:
        parent = super()._do_submit_job

        def submit() -> None:
            if not self.closed:  # a run asked for just before shutdown is dropped
                parent(job, run_times)

        self._eventloop.call_soon_threadsafe(submit)

    def shutdown(self, wait: bool = True) -> None:
        """Accept no more runs; cancel the ones not finished."""
        self.closed = True
        super().shutdown(wait)

    def live_tasks(self) -> set[Any]:
        """Job runs started and not finished yet."""
        return set(self._pending_futures)


class OffLoopScheduler(AsyncIOScheduler):  # type: ignore[misc]  # apscheduler ships no types
    """An ``AsyncIOScheduler`` whose job-store reads and writes happen in a worker thread.

    Give it ``event_loop`` and start it with ``await asyncio.to_thread(scheduler.start)``.
    """

    def __init__(self, **options: Any) -> None:
        self._store_thread = ThreadPoolExecutor(1, thread_name_prefix="jobstore")
        options.setdefault("executors", {"default": LoopExecutor()})
        super().__init__(**options)

    @run_in_event_loop  # type: ignore[untyped-decorator]  # apscheduler ships no types
    def wakeup(self) -> None:
        """Process due jobs in the store thread, then set the timer for the next round."""
        self._stop_timer()
        if self._store_thread is None:
            return
        future = self._store_thread.submit(self._process_jobs)
        future.add_done_callback(self._processed)

    def _processed(self, future: Future[float | None]) -> None:
        loop = self._eventloop
        if loop is None or loop.is_closed() or future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            log.error("the scheduler could not read its job store: %s", exc)
            wait: float | None = 10.0
        else:
            wait = future.result()
        loop.call_soon_threadsafe(self._timer_if_running, wait)

    def _timer_if_running(self, wait: float | None) -> None:
        if self.running and self._eventloop is not None:
            self._start_timer(wait)

    def live_tasks(self) -> set[Any]:
        """Job runs started and not finished yet (on the default executor)."""
        executor = self._executors.get("default")
        return executor.live_tasks() if isinstance(executor, LoopExecutor) else set()

    def close_store_thread(self) -> None:
        """Wait for the store thread to finish (call off the loop, after shutdown)."""
        pool, self._store_thread = self._store_thread, None  # type: ignore[assignment]
        if pool is not None:
            pool.shutdown(wait=True)
