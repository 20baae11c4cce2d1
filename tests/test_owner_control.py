"""The owner's control page (issue 31): processes and the leader, job history, the outbox, a
live log tail and the effective configuration, for the owner only and never a secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app.build import App
from bot.app.features import REGISTRY
from bot.clock import SystemClock
from bot.config import Settings
from bot.jobs.engine.leader import LeaseLock
from bot.jobs.engine.scheduler import JobService, JobSpec
from bot.web.auth import KeySource, WebAuth
from storage.db import Database
from storage.repos.outbox import OutboxRepo, Push
from storage.repos.users import UserRepo
from storage.repos.web import Credentials
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import FakeTelegram
from tests.support.app import AppFactory, add_user
from tests.support.serve import Cluster, free_port, leader_pid, serve_env
from tests.support.web import client_for, login_form, sign_in

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


@pytest.mark.slow
@pytest.mark.postgres
async def test_a_page_served_by_one_process_shows_every_process_and_their_logs(
    tmp_path: Path, migrated_postgres_url: str, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """Two real ``lifebot serve`` processes on one PostgreSQL database, each with its page."""
    postgres_url = migrated_postgres_url  # at the newest schema: no migration race to wait out
    web_ports = [free_port(), free_port()]
    cluster = Cluster(tmp_path, serve_env(postgres_url, fake_llm, tg))
    db = Database(postgres_url)
    try:
        await cluster.start(
            2,
            lambda i: {
                "LIFEBOT_WEB_ENABLED": "true",
                "LIFEBOT_WEB_PORT": str(web_ports[i]),
                "LIFEBOT_JOBS_HEARTBEAT": "0.5",
            },
        )
        await cluster.wait_listening(ports=web_ports)
        async with db.session() as s:
            owner = await UserRepo(s).create("Ann", is_owner=True)
        assert owner.id is not None
        links = WebAuth(
            Credentials(db),
            SystemClock(),
            KeySource(None, Credentials(db), SystemClock(), tmp_path / "k"),
            "http://x",
            timedelta(days=1),
        )
        secret = (await links.issue_link(owner.id)).rsplit("/", 1)[1]
        first, second = (cluster.procs[0].pid, cluster.procs[1].pid)
        second_said = f"web page on http://127.0.0.1:{web_ports[1]}"
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{web_ports[0]}") as web:
            signed = await web.post("/login", data=await login_form(web, secret))
            assert signed.status_code == 303, signed.text

            async def tail() -> list[dict[str, Any]]:
                answer = await web.get("/owner/log")
                assert answer.status_code == 200
                return list(answer.json()["lines"])

            deadline = time.monotonic() + 30
            while not any(second_said in line["text"] for line in await tail()):
                assert time.monotonic() < deadline, cluster.tails()
                await asyncio.sleep(0.3)
            lines = await tail()
            said = next(line for line in lines if second_said in line["text"])
            assert said["process"].endswith(f":{second}") and not said["here"]
            mine = [line for line in lines if line["here"]]
            assert mine and all(line["process"].endswith(f":{first}") for line in mine)
            page = (await web.get("/owner")).text
            processes = _section(page, "processes")
            assert processes.count("<td>running</td>") == 2, processes
            assert f":{first} (this process)" in processes
            assert f"127.0.0.1:{web_ports[1]}" in processes  # the other one's page
            leader = await leader_pid(db)
            assert leader in (first, second)
            assert f":{leader}" in processes.split("<strong>leader</strong>")[0].rsplit("<tr", 1)[1]

            # The second stops cleanly: the first's page says so, with its last lines.
            cluster.procs[1].terminate()
            await cluster.procs[1].wait()
            page = (await web.get("/owner")).text
            row = next(r for r in _section(page, "processes").split("<tr")[1:] if f":{second}" in r)
            assert "<td>stopped" in row
    finally:
        await cluster.close()
        await db.dispose()
