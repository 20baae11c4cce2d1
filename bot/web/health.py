"""Health for operators: /healthz (alive), /readyz (ready to serve), /metrics (Prometheus).

Metrics are read from the database at scrape time, so every process reports the same numbers
and nothing on the message path has to count.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from bot.errors import StorageError
from bot.web.deps import ctx
from storage.repos.web import WebViewRepo, head_revision

router = APIRouter()

LATENCY_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)
"""Seconds: the turn latency histogram's upper bounds."""
LATENCY_SAMPLE = 500
"""The newest answers the latency histogram is computed over."""


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
        await s.db.ping()
        async with s.db.session() as session:
            repo = WebViewRepo(session)
            current = await repo.schema_revision()
            leases = await repo.live_leases(s.clock.now())
        checks["database"] = Check(ok=True, detail="reachable")
        head = await asyncio.to_thread(head_revision)
        checks["migrations"] = Check(current == head, f"at {current}, newest {head}")
    except StorageError as exc:
        checks["database"] = Check(ok=False, detail=str(exc))
        leases = []
    checks["channels"] = Check(ok=True, detail=", ".join(s.channel_names()) or "none started")
    if not c.jobs_enabled:
        checks["leader"] = Check(ok=True, detail="jobs are off in this process")
    elif s.is_leader():
        checks["leader"] = Check(ok=True, detail="this process")
    elif leases:
        checks["leader"] = Check(ok=True, detail=f"another process ({leases[0].holder})")
    elif not s.db.is_sqlite:
        # PostgreSQL leaders hold an advisory lock, invisible here; standing by is normal.
        checks["leader"] = Check(ok=True, detail="another process (advisory lock)")
    else:
        checks["leader"] = Check(ok=False, detail="no process holds the scheduler lease")
    ready = all(ch.ok for ch in checks.values())
    body = {
        "status": "ready" if ready else "not ready",
        "checks": {k: {"ok": v.ok, "detail": v.detail} for k, v in checks.items()},
    }
    return JSONResponse(body, status_code=200 if ready else 503)


def _histogram_tail(name: str, values: list[float]) -> list[str]:
    return [
        f'{name}_bucket{{le="+Inf"}} {len(values)}',
        f"{name}_sum {sum(values):.3f}",
        f"{name}_count {len(values)}",
    ]


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> PlainTextResponse:
    """Prometheus text: messages per channel, turn latency, outbox depth and lateness."""
    s = ctx(request).service
    async with s.db.session() as session:
        repo = WebViewRepo(session)
        counts = await repo.message_counts()
        unanswered = await repo.unanswered()
        depth = await repo.outbox_depth()
        seconds = await repo.turn_seconds(LATENCY_SAMPLE)
        waiting = await repo.audio_waiting_all()
        late = await repo.lateness_seconds(LATENCY_SAMPLE)
    lines = [
        "# HELP lifebot_messages_total Messages stored, by channel and direction (in/out).",
        "# TYPE lifebot_messages_total counter",
    ]
    for channel, direction, n in sorted(counts):
        lines.append(
            f'lifebot_messages_total{{channel="{_esc(channel)}",direction="{direction}"}} {n}'
        )
    lines += [
        "# HELP lifebot_turns_unanswered Messages whose turn failed (the model or a tool "
        "failed): pending_retry waits for /retry.",
        "# TYPE lifebot_turns_unanswered gauge",
    ]
    for channel, status, n in sorted(unanswered):
        lines.append(f'lifebot_turns_unanswered{{channel="{_esc(channel)}",status="{status}"}} {n}')
    lines += [
        "# HELP lifebot_turn_seconds Seconds from a message in to its answer out "
        f"(newest {LATENCY_SAMPLE} answers).",
        "# TYPE lifebot_turn_seconds histogram",
    ]
    for bound in LATENCY_BUCKETS:
        lines.append(
            f'lifebot_turn_seconds_bucket{{le="{bound}"}} {sum(x <= bound for x in seconds)}'
        )
    lines += _histogram_tail("lifebot_turn_seconds", seconds)
    lines += [
        "# HELP lifebot_push_lateness_seconds Seconds a scheduled push was delivered after it "
        f"was due (newest {LATENCY_SAMPLE}).",
        "# TYPE lifebot_push_lateness_seconds histogram",
    ]
    for bound in LATENCY_BUCKETS:
        lines.append(
            f'lifebot_push_lateness_seconds_bucket{{le="{bound}"}} {sum(x <= bound for x in late)}'
        )
    lines += _histogram_tail("lifebot_push_lateness_seconds", late)
    lines += [
        "# HELP lifebot_outbox_pushes Pushes in the outbox, by state.",
        "# TYPE lifebot_outbox_pushes gauge",
    ]
    for status in sorted({"pending", "sending", "failed", *depth}):
        lines.append(f'lifebot_outbox_pushes{{status="{_esc(status)}"}} {depth.get(status, 0)}')
    lines += [
        "# HELP lifebot_transcription_queue Utterances waiting to be transcribed.",
        "# TYPE lifebot_transcription_queue gauge",
        f"lifebot_transcription_queue {waiting}",
        "# HELP lifebot_scheduler_leader 1 when this process runs the scheduled jobs.",
        "# TYPE lifebot_scheduler_leader gauge",
        f"lifebot_scheduler_leader {int(s.is_leader())}",
    ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")
