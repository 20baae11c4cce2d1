"""Health for operators: /healthz (alive), /readyz (ready to serve), /metrics (Prometheus).

``/metrics`` serves this process's own counters and histograms (``bot.metrics``: they only go
up, so Prometheus computes honest rates; several processes are scraped each and added up),
then the gauges that describe shared state, read from the database at the scrape (queue
depths, failed turns) plus whether this process leads the scheduled jobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from bot.errors import StorageError
from bot.metrics import exposition
from bot.web.deps import ctx

router = APIRouter()


@dataclass(slots=True)
class Check:
    """One readiness check."""

    ok: bool
    detail: str


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive and serving HTTP."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Database reachable, migrations current, channels started, scheduler leader known."""
    c = ctx(request)
    s = c.service
    checks: dict[str, Check] = {}
    try:
        db = await c.control.readiness()
        leases = db.leases
        checks["database"] = Check(ok=True, detail="reachable")
        checks["migrations"] = Check(db.revision == db.head, f"at {db.revision}, newest {db.head}")
    except StorageError as exc:
        checks["database"] = Check(ok=False, detail=str(exc))
        leases = []
    checks["channels"] = Check(ok=True, detail=", ".join(s.owner.channel_names()) or "none started")
    if not c.jobs_enabled:
        checks["leader"] = Check(ok=True, detail="jobs are off in this process")
    elif s.owner.is_leader():
        checks["leader"] = Check(ok=True, detail="this process")
    elif leases:
        checks["leader"] = Check(ok=True, detail=f"another process ({leases[0].holder})")
    else:
        checks["leader"] = Check(ok=False, detail="no process holds the scheduler lease")
    ready = all(ch.ok for ch in checks.values())
    body = {
        "status": "ready" if ready else "not ready",
        "checks": {k: {"ok": v.ok, "detail": v.detail} for k, v in checks.items()},
    }
    return JSONResponse(body, status_code=200 if ready else 503)


def _gauges(
    unanswered: list[tuple[str, str, int]], depth: dict[str, int], waiting: int, leader: bool
) -> bytes:
    """Gauges read from the database at this scrape, as Prometheus text."""
    turns = GaugeMetricFamily(
        "lifebot_turns_unanswered",
        "Messages whose turn failed (the model or a tool failed): pending_retry waits for /retry.",
        labels=("channel", "status"),
    )
    for channel, status, n in sorted(unanswered):
        turns.add_metric((channel, status), n)
    outbox = GaugeMetricFamily(
        "lifebot_outbox_pushes", "Pushes in the outbox, by state.", labels=("status",)
    )
    for status in sorted({"pending", "sending", "failed", *depth}):
        outbox.add_metric((status,), depth.get(status, 0))
    families: list[Metric] = [
        turns,
        outbox,
        GaugeMetricFamily(
            "lifebot_transcription_queue", "Utterances waiting to be transcribed.", value=waiting
        ),
        GaugeMetricFamily(
            "lifebot_scheduler_leader",
            "1 when this process runs the scheduled jobs.",
            value=int(leader),
        ),
    ]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return bytes(generate_latest(registry))


class _Snapshot(Collector):
    """Families already read, handed to a registry of one scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        """The families, as read."""
        return self.families


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    """Prometheus text: this process's counters and histograms, then the database's gauges."""
    c = ctx(request)
    g = await c.control.gauges()
    body = exposition() + _gauges(
        g.unanswered, g.outbox_depth, g.audio_waiting, c.service.owner.is_leader()
    )
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)  # what every Prometheus reads
