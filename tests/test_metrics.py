"""Metrics through prometheus_client (issue 28): honest counters, declared names, errors by kind.

Counters only go up and histograms hold this process's own observations, so deleting rows
(a person's delete-my-data) never makes a count go down: Prometheus reads a drop as a restart
and the rate it computes is then wrong. Every metric a feature declares is exported, and every
``lifebot_`` metric exported is declared by a feature.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bot.app.build import App
from bot.app.features import REGISTRY
from bot.web.auth import WRITE
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, fail, say
from tests.support.app import add_user
from tests.support.builders import make_inbound
from tests.support.jobs import jobs_app, jobs_of, make_user
from tests.support.web import client_for

Sample = tuple[str, tuple[tuple[str, str], ...]]


async def scrape(client: httpx.AsyncClient) -> tuple[dict[Sample, float], dict[str, str]]:
    """Every sample at /metrics by (name, labels), and each family's type by its name."""
    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[Sample, float] = {}
    kinds: dict[str, str] = {}
    for family in text_string_to_metric_families(r.text):
        name = family.name + ("_total" if family.type == "counter" else "")
        kinds[name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, kinds


def value(samples: dict[Sample, float], name: str, **labels: str) -> float:
    """One sample's value (0 when it was never observed)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_every_declared_metric_is_exported_and_every_exported_one_is_declared(
    app: App,
) -> None:
    async with client_for(app) as client:
        _, kinds = await scrape(client)
    declared = set(REGISTRY.metrics())
    ours = {name for name in kinds if name.startswith("lifebot_")}
    assert declared - ours == set(), "declared by a feature but not exported"
    assert ours - declared == set(), "exported but declared by no feature (Feature.metrics)"
    assert kinds["lifebot_turn_seconds"] == "histogram"
    assert kinds["lifebot_messages_total"] == "counter"
    assert kinds["lifebot_outbox_pushes"] == "gauge"


async def test_counts_never_go_down_when_the_rows_behind_them_are_deleted(
    app: App, fake_llm: FakeLLM
) -> None:
    fake_llm.default = lambda body: say("Hello!")
    ann = await add_user(app, "ann")
    async with client_for(app) as client:
        before, _ = await scrape(client)
        for words in ("hi", "how are you?", "thanks"):
            result = await app.dispatcher.handle(make_inbound(words, sender="ann"))
            assert result.status == "answered"
        answered, kinds = await scrape(client)
        await app.web.service.data.erase(ann)  # delete-my-data: every row of ann's is gone
        after, _ = await scrape(client)

    grew = value(answered, "lifebot_messages_total", channel="fake", direction="in")
    assert grew - value(before, "lifebot_messages_total", channel="fake", direction="in") == 3
    turns = value(answered, "lifebot_turn_seconds_count") - value(
        before, "lifebot_turn_seconds_count"
    )
    assert turns == 3
    went_down = [
        f"{name}{dict(labels)}: {was} -> {after.get((name, labels), 0.0)}"
        for (name, labels), was in answered.items()
        if name.startswith("lifebot_")
        and kinds.get(name.removesuffix("_count").removesuffix("_sum").removesuffix("_bucket"))
        in ("counter", "histogram")
        and after.get((name, labels), 0.0) < was
    ]
    assert not went_down, went_down


async def test_llm_errors_are_counted_by_kind(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app, "ann")
    async with client_for(app) as client:
        before, _ = await scrape(client)
        fake_llm.default = lambda body: fail(401)
        refused = await app.dispatcher.handle(make_inbound("hi", sender="ann"))
        fake_llm.default = lambda body: fail(503)  # retried, then given up
        down = await app.dispatcher.handle(make_inbound("hello?", sender="ann"))
        after, _ = await scrape(client)
    assert (refused.status, down.status) == ("llm_down", "llm_down")

    def grew(kind: str) -> float:
        return value(after, "lifebot_llm_errors_total", kind=kind) - value(
            before, "lifebot_llm_errors_total", kind=kind
        )

    assert grew("auth") >= 1
    assert grew("server") >= 1
    assert grew("timeout") == 0
    assert value(after, "lifebot_turns_total", channel="fake", outcome="llm_down") >= 2


async def test_http_requests_are_counted_by_route_template_not_by_address(app: App) -> None:
    ann = await add_user(app, "ann")
    assert ann.id is not None
    _, token = await app.web.auth.new_api_token(ann.id, "t", WRITE)
    me = {"Authorization": f"Bearer {token}"}
    async with client_for(app) as client:
        before, _ = await scrape(client)
        for fact in (1, 2, 3):  # three addresses, one route
            await client.delete(f"/api/v1/facts/{fact}", headers=me)
        await client.get("/api/v1/facts", headers={"Authorization": "Bearer lbk_wrong-token"})
        after, _ = await scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = {"route": "/api/v1/facts/{fact_id}", "method": "DELETE", "status": "404"}
    assert grew("lifebot_http_requests_total", **route) == 3
    assert grew("lifebot_http_refused_total", reason="signin") == 1
    assert grew("lifebot_http_request_seconds_count", route="/api/v1/facts/{fact_id}") == 3


async def test_a_late_push_is_observed_in_its_lateness_histogram(tmp_path: Path) -> None:
    start = datetime(2025, 6, 3, 16, 0, tzinfo=UTC)
    clock = ManualClock(start)
    async with jobs_app(tmp_path, clock) as application:
        application.dispatcher.register(RecordingChannel("fake"))
        await make_user(application, "ana")
        async with client_for(application) as client:
            before, _ = await scrape(client)
            made = await application.dispatcher.handle(
                make_inbound("/remind at 17:00 to call mom", sender="ana")
            )
            assert made.reply is not None and "call mom" in made.reply
            # The process was busy: the 17:00 reminder goes out 90 seconds late.
            await jobs_of(application).plan_and_send(
                clock.set(start + timedelta(hours=1, seconds=90))
            )
            after, _ = await scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("lifebot_pushes_total", kind="reminder", outcome="delivered") == 1
    assert grew("lifebot_push_lateness_seconds_count") == 1
    assert grew("lifebot_push_lateness_seconds_bucket", le="60.0") == 0
    assert grew("lifebot_push_lateness_seconds_bucket", le="120.0") == 1
