"""One log line a minute, with a count, when a listening socket cannot accept (no descriptors).

asyncio reports a failed ``accept`` (EMFILE, ENFILE, ENOBUFS, ENOMEM) to the loop's exception
handler with a traceback, and Python 3.11 retries the rest of its accept batch at once: one
exhausted moment wrote about a hundred six-line tracebacks a second. The pendant server keeps
its own sockets under the limit (``bot/device/gate.py``); this keeps the log readable when
something else runs the process out of descriptors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

log = logging.getLogger(__name__)

ACCEPT_FAILED = "socket.accept() out of system resource"
"""The message asyncio gives the exception handler for a failed accept."""


class AcceptErrorThrottle:
    """A loop exception handler: accept failures are counted; everything else passes on."""

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self.failed = 0
        """Failed accepts not yet logged."""
        self._logged_at = float("-inf")

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Count an accept failure (one line per interval); hand anything else to asyncio."""
        if context.get("message") != ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        self.failed += 1
        now = time.monotonic()
        if now - self._logged_at >= self.interval:
            self._logged_at = now
            log.error(
                "could not accept %d connection(s): %s (the process's open-file limit; "
                "logged at most once every %g s)",
                self.failed,
                context.get("exception"),
                self.interval,
            )
            self.failed = 0


def throttle_accept_errors(interval: float = 60.0) -> AcceptErrorThrottle:
    """Install the throttle on the running loop."""
    handler = AcceptErrorThrottle(interval)
    asyncio.get_running_loop().set_exception_handler(handler)
    return handler
