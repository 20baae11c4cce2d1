"""This process's own metrics, for Prometheus (issue 28).

Counters only go up and histograms hold what this process observed since it started, so a
scrape never sees a count go down (Prometheus would read that as a restart); several
processes are added up by Prometheus, each scraped on its own. A metric is made where it is
observed, as a module constant (``TURNS = Counter("lifebot_turns_total", "...", ("channel",))``),
and named in its feature's declaration (``Feature.metrics``), where the contract tests look
for it at ``/metrics``.

``prometheus_client`` (about 50 ms to import) is loaded at the first observation or scrape,
so a CLI command that observes nothing never loads it. Gauges read from the database at
scrape time (queue depths) are made by the scrape itself (``bot.web.health``).
"""

from __future__ import annotations

import threading
from typing import Any

_LOCK = threading.Lock()
_DECLARED: list[_Metric] = []

SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
"""Default histogram bounds in seconds: a web request to a slow turn to a late push."""


class _Metric:
    """A metric declared by name; made in ``prometheus_client``'s registry on first use."""

    kind = ""

    def __init__(
        self,
        name: str,
        about: str,
        labels: tuple[str, ...] = (),
        buckets: tuple[float, ...] = SECONDS,
    ) -> None:
        self.name = name
        """The name as scraped (a counter's ends in ``_total``)."""
        self.about = about
        """The HELP line."""
        self.labels = labels
        """Label names; every observation gives one value per label, in this order."""
        self.buckets = buckets
        self._real: Any = None
        with _LOCK:
            _DECLARED.append(self)

    def real(self) -> Any:
        """The ``prometheus_client`` object (made, and the library loaded, on first use)."""
        if self._real is None:
            with _LOCK:
                if self._real is None:
                    self._real = _make(self)
        return self._real

    def _child(self, values: tuple[str, ...]) -> Any:
        real = self.real()
        return real.labels(*values) if self.labels else real


class Counter(_Metric):
    """A count that only goes up."""

    kind = "counter"

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        """Add ``amount`` for these label values."""
        self._child(labels).inc(amount)


class Histogram(_Metric):
    """Observations in buckets, with their count and sum."""

    kind = "histogram"

    def observe(self, value: float, *labels: str) -> None:
        """Record one observation for these label values."""
        self._child(labels).observe(value)


def _make(metric: _Metric) -> Any:
    import prometheus_client  # noqa: PLC0415  # loaded by the first metric used

    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # one series less
    if isinstance(metric, Histogram):
        return prometheus_client.Histogram(
            metric.name, metric.about, metric.labels, buckets=metric.buckets
        )
    return prometheus_client.Counter(metric.name, metric.about, metric.labels)


def declared() -> tuple[_Metric, ...]:
    """Every metric made so far by an imported module."""
    with _LOCK:
        return tuple(_DECLARED)


def exposition() -> bytes:
    """The Prometheus text of every declared metric (those never observed included)."""
    import prometheus_client  # noqa: PLC0415

    for metric in declared():
        metric.real()
    return bytes(prometheus_client.generate_latest(prometheus_client.REGISTRY))
