"""A browser signed in through one ``serve`` process is signed in on all of them (issue 28).

Three real ``lifebot serve`` processes, each with a data folder of its own (as on three hosts),
share one PostgreSQL database and no LIFEBOT_WEB_SECRET. The session key each signs cookies
with was a file in its own data folder, so the other two refused the cookie; it is now kept
in the database, and a balancer may send the browser to any of them.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from bot.clock import SystemClock
from bot.web.auth import KeySource, WebAuth
from storage.db import Database
from storage.repos.users import UserRepo
from storage.repos.web import Credentials
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import BOT_ID, FakeTelegram
from tests.support.serve import Cluster, free_port, serve_env
from tests.support.web import login_form

pytestmark = pytest.mark.postgres

DAY = timedelta(days=1)


@pytest.mark.slow
async def test_a_session_signed_by_one_process_works_on_the_others(
    tmp_path: Path, migrated_postgres_url: str, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    postgres_url = migrated_postgres_url  # at the newest schema: no migration race to wait out
    web_ports = [free_port() for _ in range(3)]
    cluster = Cluster(tmp_path, serve_env(postgres_url, fake_llm, tg))
    db = Database(postgres_url)
    try:
        await cluster.start(
            3,
            lambda i: {
                "LIFEBOT_WEB_ENABLED": "true",
                "LIFEBOT_WEB_HOST": "127.0.0.1",
                "LIFEBOT_WEB_PORT": str(web_ports[i]),
            },
        )
        await cluster.wait_listening(ports=web_ports)
        async with db.session() as s:
            ana, _ = await UserRepo(s).create_with_identity(
                "Ana", "telegram", str(BOT_ID), "4242", chat_id="4242"
            )
        assert ana.id is not None
        # The link /web would send (a row in the shared database; no key is involved yet).
        auth = WebAuth(
            Credentials(db),
            SystemClock(),
            KeySource(None, Credentials(db), SystemClock(), tmp_path / "none"),
            "",
            DAY,
        )
        secret = (await auth.issue_link(ana.id)).rsplit("/", 1)[1]

        first, *others = (f"http://127.0.0.1:{p}" for p in web_ports)
        async with httpx.AsyncClient(base_url=first, timeout=30) as browser:
            signed = await browser.post("/login", data=await login_form(browser, secret))
            assert signed.status_code == 303, signed.text
            cookie = browser.cookies["lifebot_session"]
        for base in others:  # the balancer sends the same browser elsewhere
            async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
                browser.cookies.set("lifebot_session", cookie)
                today = await browser.get("/", follow_redirects=False)
                assert today.status_code == 200, f"{base}: {today.headers.get('location')}"
                csrf = re.search(r'name="csrf" value="([^"]+)"', today.text)
                assert csrf is not None
                saved = await browser.post(
                    "/facts", data={"csrf": csrf.group(1), "text": f"I was served by {base}"}
                )
                assert saved.status_code == 303
                facts = await browser.get("/facts")
                assert f"I was served by {base}" in facts.text  # the form was taken
        # A forged cookie is still refused everywhere.
        async with httpx.AsyncClient(base_url=others[0], timeout=30) as stranger:
            stranger.cookies.set("lifebot_session", cookie.rpartition(".")[0] + "." + "0" * 32)
            assert (await stranger.get("/", follow_redirects=False)).status_code == 303
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.tails()}") from exc
    finally:
        await cluster.close()
        await db.dispose()
