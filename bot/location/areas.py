"""A readable area name for unnamed places: the nearest town, offline.

The ``reverse-geocode`` package ships GeoNames' list of towns (population 1000 and up) and
finds the nearest with a k-d tree; nothing goes over the network. Loading the list takes under
a second, done once, in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


class AreaNames:
    """``near(lat, lon)`` -> ``"Mitte, Germany"``; None when the lookup is unavailable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._module: Any = None
        self._failed = False

    def _lookup(self, lat: float, lon: float) -> str | None:
        with self._lock:
            if self._module is None and not self._failed:
                try:
                    import reverse_geocode  # noqa: PLC0415  # loads its town list on first use

                    self._module = reverse_geocode
                except ImportError:
                    log.warning("reverse-geocode is not installed: unnamed places stay unnamed")
                    self._failed = True
            module = self._module
        if module is None:
            return None
        hit = module.get((lat, lon))
        parts = [hit.get("city"), hit.get("country")]
        return ", ".join(str(p) for p in parts if p) or None

    async def near(self, lat: float, lon: float) -> str | None:
        """The nearest town and its country (off the event loop)."""
        return await asyncio.to_thread(self._lookup, lat, lon)
