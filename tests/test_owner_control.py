"""The owner's control page (issue 31): processes and the leader, job history, the outbox, a
live log tail and the effective configuration, for the owner only and never a secret.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from datetime import datetime
from pathlib import Path

from bot.app.build import App
from bot.app.features import REGISTRY
from bot.config import Settings
from bot.jobs.leader import LeaseLock
from bot.jobs.scheduler import JobService, JobSpec
from storage.repos.outbox import OutboxRepo, Push
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user
from tests.support.web import client_for, sign_in

log = logging.getLogger("lifebot.test.control")


def _declared_secret_settings() -> list[str]:
    return sorted({s.setting for s in REGISTRY.secrets() if s.setting})


async def _failing_run(application: App, job_id: str) -> None:
    """A run of ``job_id`` that fails, recorded by a job service of its own on the same db."""

    async def broken(_now: datetime) -> str:
        raise RuntimeError("the feed server said 503")

    other = JobService(
        db=application.db,
        clock=application.clock,
        outbox=application.jobs.outbox,
        lock=LeaseLock(application.db, holder="otherhost:4242:abcdef"),
        jobs=[JobSpec(job_id, 60, broken, "a job that fails")],
    )
    assert await other.run_job(job_id) == "failed"


async def test_the_owner_sees_processes_the_leader_jobs_outbox_and_settings(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    application = await app_factory(fake_llm, jobs_heartbeat=0.2)
    ann = await add_user(application, "ann", owner=True, name="Ann")
    assert ann.id is not None
    await application.presence.start()  # as `lifebot serve` does once its channels run
    # This process takes the leader lease (the scheduler itself stays off: its own runs
    # would race the ones below).
    assert await application.jobs.service.lock.acquire(application.clock.now())
    await application.jobs.service.run_job("reminders.fire")
    await _failing_run(application, "calendars.refresh")
    now = application.clock.now()
    async with application.db.session() as s:
        await OutboxRepo(s).enqueue([Push(ann.id, "notice", "control-1", now, text="hi")], now)

    async with client_for(application) as client:
        await sign_in(application, client, ann)
        page = await client.get("/owner")
    assert page.status_code == 200
    html = page.text
    me = application.presence.process_id.rsplit(":", 1)[0]  # host:pid
    processes = _section(html, "processes")
    assert f"{me} (this process)" in processes
    assert "<strong>leader</strong>" in processes
    assert "<td>running</td>" in processes
    assert f"Leader: {me} (this process)" in processes
    jobs = _section(html, "jobs")
    fire = _row(jobs, "job-reminders.fire")
    assert "fired 0" in fire  # the last result of the run above
    refresh = _row(jobs, "job-calendars.refresh")
    assert "RuntimeError: the feed server said 503" in refresh
    assert "<strong>1</strong>" in refresh  # one failure in its history
    runs = _section(html, "jobs").split('id="run-table"', 1)[1]
    assert "otherhost:4242" in runs and "failed: RuntimeError" in runs
    assert f"{me}</td>" in runs  # this process ran reminders.fire
    outbox = _section(html, "outbox")
    assert "pending 1" in outbox and "notice" in outbox
    config = _section(html, "config")
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        variable = getattr(alias, "choices", [name.upper()])[0]
        assert f"<code>{variable}</code>" in config, f"{name} is not on the page"
    assert _row(config, "setting-jobs_heartbeat").count("yes") == 1  # changed from default


async def test_only_the_owner_sees_the_page_and_its_log(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    application = await app_factory(fake_llm)
    await add_user(application, "ann", owner=True, name="Ann")
    bob = await add_user(application, "bob", name="Bob")
    async with client_for(application) as client:
        for path in ("/owner", "/owner/log"):
            stranger = await client.get(path)
            assert stranger.status_code == 303
            assert stranger.headers["location"] == "/signin"
        await sign_in(application, client, bob)
        for path in ("/owner", "/owner/log"):
            refused = await client.get(path)
            assert refused.status_code == 404  # not the owner: the page is not advertised
            assert "log" not in refused.text.lower().replace("login", "")


async def test_no_declared_secret_reaches_the_page_or_the_log_tail(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    values: dict[str, str] = {}
    for name in _declared_secret_settings():
        values[name] = f"{name.replace('_', '')}-{secrets.token_hex(12)}"
    values["telegram_bot_token"] = f"123456789:{secrets.token_urlsafe(30)}"
    db_file = tmp_path / f"lifebot-{secrets.token_hex(8)}.db"
    values["database_url_setting"] = f"sqlite+aiosqlite:///{db_file}"
    values["calendar_key"] = "KzJ4bm5tR0VnT2ZxV1ZyVmdqV2JjN3FYZ0x6dE9rUmQ="  # a Fernet key
    application = await app_factory(fake_llm, **values)
    assert application.db.url == values["database_url_setting"]  # the app really uses it
    ann = await add_user(application, "ann", owner=True, name="Ann")
    shapes = [
        "Authorization: Bearer lbk_YSBwZXJzb25hbCBhcGkgdG9rZW4",
        "device lbd_c2VjcmV0LWRldmljZS10b2tlbg",
        "feed https://cal.example.test/private/abc123def456.ics?key=zzzz",
        "postgresql://lifebot:hunter2hunter2@db.example.test/lifebot",
    ]
    # Every secret, and every declared shape, written to the log after the app started.
    log.warning("credentials in a careless line: %s | %s", " ".join(values.values()), shapes)
    async with client_for(application) as client:
        await sign_in(application, client, ann)
        page = (await client.get("/owner")).text
        tail = (await client.get("/owner/log")).text
    assert "credentials in a careless line" in page  # the line itself is shown...
    assert "credentials in a careless line" in json.loads(tail)["lines"][-1]["text"]
    for name, value in values.items():  # ...but none of the secrets
        assert value not in page, f"{name} is on the page"
        assert value not in tail, f"{name} is in the log tail"
        assert _row(page, f"setting-{name}").count("set (hidden)") == 1
    for leaked in ("YSBwZXJzb25hbCBhcGkgdG9rZW4", "c2VjcmV0LWRldmljZS10b2tlbg", "hunter2hunter2",
                   "abc123def456"):  # fmt: skip
        assert leaked not in page and leaked not in tail


def test_every_setting_named_like_a_secret_is_declared_as_one() -> None:
    declared = set(_declared_secret_settings())
    looks = re.compile(r"(_token$|secret|password|api_key|_key$|database_url)")
    undeclared = {n for n in Settings.model_fields if looks.search(n)} - declared
    assert not undeclared, f"settings that look secret but no feature declares: {undeclared}"


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return html[start : html.index("</section>", start)]


def _row(html: str, row_id: str) -> str:
    start = html.index(f'id="{row_id}"')
    return html[start : html.index("</tr>", start)]
