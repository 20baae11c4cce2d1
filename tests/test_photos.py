"""Photos (issue 16): through the Telegram and Slack fakes, described by a scripted vision model
(OpenAI ``image_url`` parts with a data URL), kept in the data dir and found by memory search.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import socket
import time
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import select

from bot.adapters.telegram.inbox import ORPHANED
from bot.agent.budget import message_tokens
from bot.agent.llm import data_url, image_parts
from bot.agent.photos import NO_VISION
from bot.app.build import App, start_channels
from bot.app.doctor import check_vision
from bot.clock import Clock
from storage.models import LifebotProcess, Message
from storage.repos.users import UserRepo
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM, Step, hang, say
from tests.fakes.slack_api import BOT_TOKEN, TEAM_ID, FakeSlack, dm_event
from tests.fakes.telegram_api import BOT_ID, TOKEN, FakeTelegram
from tests.support.app import AppFactory, add_user, make_settings
from tests.support.cli import run_cli
from tests.support.serve import free_port, spawn_serve, telegram_serve_env
from tests.support.slack import ANA, ANA_DM, Slack, start_slack
from tests.support.telegram import CHAT, Starter

PHOTO = b"\xff\xd8\xff\xe0 a photo of a sticky note " + bytes(range(256)) * 4
SEEN = {"description": "A yellow sticky note with the home wifi password.", "text": "sunflower42"}


def is_vision_call(body: dict[str, Any]) -> bool:
    """The describe request: a picture in the first message, no tools, the smart model."""
    content = body["messages"][0]["content"]
    return isinstance(content, list) and "memory index" in content[0]["text"]


def vision_model(llm: FakeLLM, *, agent: str | None = None) -> None:
    """Describe every picture as SEEN; the router says "agent"; the agent answers ``agent``."""

    def respond(body: dict[str, Any]) -> Step | None:
        if is_vision_call(body):
            assert body["model"] == "fake-smart"
            return say(json.dumps(SEEN))
        if "Classify the user's message" in str(body["messages"][0]["content"]):
            return say('{"route": "agent"}')
        if body.get("model") != "fake-smart":
            return say("{}")  # after-turn work (proposal detection) finds nothing
        return say(agent) if agent is not None else None  # None: an unscripted call fails

    llm.default = respond


def pictures_sent(llm: FakeLLM) -> list[str]:
    """Every image URL any request carried, in order."""
    urls = []
    for body in llm.chat_requests:
        for msg in body["messages"]:
            if isinstance(msg.get("content"), list):
                urls += [p["image_url"]["url"] for p in msg["content"] if p["type"] == "image_url"]
    return urls


async def found(app: App, channel: str, account: str, sender: str, query: str) -> list[str]:
    """Texts of the top memory search hits for the person on that channel."""
    async with app.db.session() as s:
        ident = await UserRepo(s).find_identity(channel, account, sender)
    assert ident is not None
    out = await app.memory.retriever.search(
        ident.user_id, query, now=app.clock.now(), tz=ZoneInfo("UTC"), limit=3
    )
    return [e.item.text for e in out.evidence]


async def stored(app: App) -> list[bytes]:
    """The pictures kept in the file store."""
    return [await app.files.get("photos", f.key) for f in await app.files.listing("photos")]


DATA_URL = "data:image/jpeg;base64," + base64.b64encode(PHOTO).decode()


async def test_a_telegram_photo_is_described_and_found_by_memory_search(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    vision_model(fake_llm)
    app = await telegram(vision=True)

    await tg.send_photo(CHAT, PHOTO)

    [reply] = await tg.wait_texts(CHAT, 1)
    assert "sticky note with the home wifi password" in reply
    assert "sunflower42" in reply
    assert pictures_sent(fake_llm) == [DATA_URL]  # the largest size, not the thumbnail
    assert await stored(app) == [PHOTO]
    hits = await found(app, "telegram", str(BOT_ID), str(CHAT), "the photo of the wifi password")
    assert "sunflower42" in hits[0]


async def test_a_question_sent_with_a_photo_is_answered_with_the_picture(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    vision_model(fake_llm, agent="The password on the note is sunflower42.")
    await telegram(vision=True)

    await tg.send_photo(CHAT, PHOTO, caption="What's the password on this note?")

    [reply] = await tg.wait_texts(CHAT, 1)
    assert reply == "The password on the note is sunflower42."
    agent_call = next(b for b in fake_llm.chat_requests if b.get("tools"))
    question = agent_call["messages"][-1]["content"]
    assert question[0] == {"type": "text", "text": "What's the password on this note?"}
    assert question[1]["image_url"]["url"] == DATA_URL


async def test_retry_after_an_outage_asks_again_with_the_picture(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    down = True

    def respond(body: dict[str, Any]) -> Step | None:
        if body.get("tools"):  # the agent's turn: down at first, then it answers
            return Step(status=500) if down else say("The password is sunflower42.")
        if is_vision_call(body):
            return say(json.dumps(SEEN))
        return say('{"route": "agent"}' if "Classify" in str(body["messages"][0]) else "{}")

    fake_llm.default = respond
    await telegram(vision=True)
    await tg.send_photo(CHAT, PHOTO, caption="What's the password on this note?")
    [outage] = await tg.wait_texts(CHAT, 1)
    assert "/retry" in outage

    down = False
    await tg.send_text(CHAT, "/retry")
    replies = await tg.wait_texts(CHAT, 2)
    assert replies[-1] == "The password is sunflower42."
    asked = [b for b in fake_llm.chat_requests if b.get("tools")][-1]["messages"][-1]["content"]
    assert asked[0] == {"type": "text", "text": "What's the password on this note?"}
    assert asked[1]["image_url"]["url"] == DATA_URL  # the picture is asked about again


HELP = "Commands:"
"""How the answer to /help begins (a command: no model call)."""


async def answers_before_a_command(tg: FakeTelegram) -> list[str]:
    """Send /help, wait for its answer, and return the chat's texts before it.

    A chat's messages are handled one after another, in order: a reply to each photo of an
    album, had there been one, would have come before /help's answer.
    """
    await tg.send_text(CHAT, "/help")
    await tg.wait_for(lambda: any(t.startswith(HELP) for t in tg.texts(CHAT)), 30)
    *before, last = tg.texts(CHAT)
    assert last.startswith(HELP), tg.texts(CHAT)
    return before


async def test_an_album_is_one_message_with_every_picture_and_one_answer(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """Telegram sends an album (several photos sent together) as one message per photo, all
    with the same ``media_group_id`` and the caption on one of them (core.telegram.org/bots/
    api#message). Each became its own message: the question was answered looking at one
    picture, and every other photo got a reply of its own."""
    vision_model(fake_llm, agent="The password on the notes is sunflower42.")
    app = await telegram(vision=True)
    photos = [PHOTO + bytes([n]) * 8 for n in range(3)]

    await tg.send_photo(
        CHAT, photos[0], caption="What is the password on these?", media_group_id="77"
    )
    for data in photos[1:]:
        await tg.send_photo(CHAT, data, media_group_id="77")

    [reply] = await tg.wait_texts(CHAT, 1)
    assert reply == "The password on the notes is sunflower42."
    assert await answers_before_a_command(tg) == [reply]
    [turn] = [b for b in fake_llm.chat_requests if b.get("tools")]
    asked = turn["messages"][-1]["content"]
    assert asked[0] == {"type": "text", "text": "What is the password on these?"}
    urls = [p["image_url"]["url"] for p in asked[1:]]
    assert urls == ["data:image/jpeg;base64," + base64.b64encode(d).decode() for d in photos]
    assert sorted(await stored(app)) == sorted(photos)


async def test_an_album_through_the_webhook_is_one_message_too(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """Telegram sends a chat's next update to a webhook only once the last was answered
    (grammY's docs, "Ending Webhook Requests in Time"): an album's items are answered as soon
    as they are held, or the album could never come together."""
    vision_model(fake_llm, agent="The password on the notes is sunflower42.")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    await telegram(
        vision=True,
        telegram_webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        telegram_webhook_port=port,
    )
    photos = [PHOTO + bytes([n]) * 8 for n in range(3)]
    started = time.perf_counter()
    for n, data in enumerate(photos):
        caption = "What is the password on these?" if n == 0 else None
        await tg.send_photo(CHAT, data, caption=caption, media_group_id="78")
    assert time.perf_counter() - started < 1.0  # each answered at once, not after the album

    [reply] = await tg.wait_texts(CHAT, 1)
    assert reply == "The password on the notes is sunflower42."
    assert await answers_before_a_command(tg) == [reply]
    [turn] = [b for b in fake_llm.chat_requests if b.get("tools")]
    assert len(turn["messages"][-1]["content"]) == 1 + len(photos)


ALBUM = [PHOTO + bytes([n]) * 8 for n in range(3)]
ALBUM_ANSWER = "The password on the notes is sunflower42."
QUIET = 0.2
"""The restarts' album quiet (the default is 1 s)."""
RECOVER_EVERY = 0.5
"""How often the restarts look for items a stopped process left (the default is 5 s)."""
SETTLE = 1.5
"""Seconds a restart runs on after its expected texts: a second answer to the album would
come by then (it is held at start, whole, and handed on after ``QUIET``)."""


async def album_then_kill(
    app_factory: AppFactory,
    tg: FakeTelegram,
    llm: FakeLLM,
    tmp_path: Path,
    *,
    until: Callable[[], bool] | None = None,
    serve_env: dict[str, str] | None = None,
    meanwhile: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """A ``serve`` process (webhook) gets ALBUM from Ana and is killed (SIGKILL) right after
    the last item was answered, or once ``until()``; returns the settings of a restart.

    ``serve_env`` adds to the process's environment; ``meanwhile(settings)`` runs after the
    album, while the process lives on (before ``until``). The album comes once the process
    is seen by its heartbeat (its row in ``lifebotprocess``), as any album after its start."""
    port = free_port()
    settings: dict[str, Any] = {
        "telegram_bot_token": TOKEN,
        "telegram_api_url": tg.api_url,
        "telegram_retries": 2,
        "telegram_webhook_url": f"http://127.0.0.1:{port}/telegram/hook",
        "telegram_webhook_port": port,
        "jobs_enabled": False,
        "vision": True,
        # The restarts hold every item they take on at once: the album is whole at once, so
        # a short quiet ends it without splitting it (the killed process keeps the default).
        "telegram_album_quiet": QUIET,
        "telegram_album_recover_every": RECOVER_EVERY,
        **overrides,
    }
    setup = await app_factory(llm, **settings)
    await add_user(setup, str(CHAT), channel_name="telegram", account=str(BOT_ID), name="Ana")
    env = telegram_serve_env(
        tmp_path,
        llm,
        tg,
        LIFEBOT_VISION="true",
        LIFEBOT_JOBS_ENABLED="false",
        LIFEBOT_WEB_ENABLED="false",
        LIFEBOT_TELEGRAM_WEBHOOK_URL="https://bot.example.test/telegram/hook",
        LIFEBOT_TELEGRAM_WEBHOOK_PORT=str(port),
        **(serve_env or {}),
    )
    if "database_url_setting" in overrides:
        env["LIFEBOT_DATABASE_URL"] = str(overrides["database_url_setting"])
    proc = spawn_serve(tmp_path, env)
    try:
        await tg.wait_for(lambda: tg.webhook_url is not None or proc.poll() is not None, 60)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        tg.webhook_url = settings["telegram_webhook_url"]  # the proxy in front: this port
        await heartbeat_seen(setup)
        for n, data in enumerate(ALBUM):
            caption = "What is the password on these?" if n == 0 else None
            await tg.send_photo(CHAT, data, caption=caption, media_group_id="80")
        if meanwhile is not None:
            await meanwhile(settings)
        if until is not None:
            await tg.wait_for(until, 30)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return settings


async def heartbeat_seen(app: App, within: float = 30) -> None:
    """Wait until a process (not ``app``: it is not started) has written its heartbeat."""
    async with asyncio.timeout(within):
        while True:
            async with app.db.session() as s:
                if (await s.exec(select(LifebotProcess))).first() is not None:
                    return
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def on_telegram(
    app_factory: AppFactory, llm: FakeLLM, settings: dict[str, Any], clock: Clock | None = None
) -> AsyncIterator[App]:
    """lifebot on ``settings`` with its Telegram channel started (another process on the same
    database, or the killed one started again); its channel stopped after."""
    app = await app_factory(llm, clock=clock, **settings)
    assert await start_channels(app) == ["telegram"]
    try:
        yield app
    finally:
        for adapter in app.started:
            await adapter.stop()


async def run_a_while(
    app_factory: AppFactory,
    tg: FakeTelegram,
    llm: FakeLLM,
    settings: dict[str, Any],
    *,
    texts: int = 0,
    clock: Clock | None = None,
) -> None:
    """Start lifebot again until Ana has ``texts`` texts, and ``SETTLE`` s more (a second
    answer to one message would come by then); then stop it."""
    async with on_telegram(app_factory, llm, settings, clock):
        if texts:
            await tg.wait_texts(CHAT, texts)
        await asyncio.sleep(SETTLE)


@pytest.mark.slow
async def test_an_album_acknowledged_to_the_webhook_outlives_a_kill_before_it_is_handled(
    app_factory: AppFactory, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A webhook answers each item of an album as soon as it comes (Telegram sends the next
    only then), so Telegram never sends them again. A ``serve`` killed (SIGKILL) in the second
    before the album was handled lost every photo; the next start now answers it, once."""
    vision_model(fake_llm, agent=ALBUM_ANSWER)
    settings = await album_then_kill(app_factory, tg, fake_llm, tmp_path)
    assert tg.calls_to("getFile") == []  # killed before the album was handled

    for restart in range(2):  # two restarts: the album is answered by the first, once
        await run_a_while(app_factory, tg, fake_llm, settings, texts=1 - restart)
    assert tg.texts(CHAT) == [ALBUM_ANSWER]
    [turn] = [b for b in fake_llm.chat_requests if b.get("tools")]
    asked = turn["messages"][-1]["content"]
    assert asked[0] == {"type": "text", "text": "What is the password on these?"}
    urls = [p["image_url"]["url"] for p in asked[1:]]
    assert urls == ["data:image/jpeg;base64," + base64.b64encode(d).decode() for d in ALBUM]


@pytest.mark.slow
async def test_an_album_killed_in_its_turn_is_offered_for_retry_and_not_answered_twice(
    app_factory: AppFactory, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Killed once the album was stored and the model was thinking about it: the next starts
    offer it for /retry once (as any message a kill cut off) and never answer it again."""
    vision_model(fake_llm, agent=ALBUM_ANSWER)
    answer = fake_llm.default
    assert answer is not None
    fake_llm.default = lambda body: hang(8) if body.get("tools") else answer(body)

    def thinking() -> bool:
        return any(b.get("tools") for b in fake_llm.chat_requests)

    settings = await album_then_kill(app_factory, tg, fake_llm, tmp_path, until=thinking)
    fake_llm.default = answer
    for restart in range(2):
        await run_a_while(app_factory, tg, fake_llm, settings, texts=1 - restart)
    [note] = tg.texts(CHAT)
    assert "restarted" in note and "What is the password on these?" in note
    assert len([b for b in fake_llm.chat_requests if b.get("tools")]) == 1


@pytest.mark.slow
@pytest.mark.postgres
async def test_on_postgres_a_running_process_takes_over_the_album_of_a_killed_one(
    app_factory: AppFactory,
    tg: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
    migrated_postgres_url: str,
) -> None:
    """With several processes on one database, the items another took a moment ago may be
    on their way in a live process: they are left alone. Once nobody has let them go for a
    minute, a running process takes the album on, and it is answered once."""
    vision_model(fake_llm, agent=ALBUM_ANSWER)
    settings = await album_then_kill(
        app_factory, tg, fake_llm, tmp_path, database_url_setting=migrated_postgres_url
    )
    clock = ManualClock(datetime.now(UTC))
    async with on_telegram(app_factory, fake_llm, settings, clock):
        await asyncio.sleep(2)
        assert tg.texts(CHAT) == []  # just taken by another process: perhaps a live one
        clock.advance(seconds=ORPHANED + 1)
        assert await tg.wait_texts(CHAT, 1, within=RECOVER_EVERY + 15) == [ALBUM_ANSWER]
    await run_a_while(app_factory, tg, fake_llm, settings, clock=clock)
    assert tg.texts(CHAT) == [ALBUM_ANSWER]


@pytest.mark.slow
@pytest.mark.postgres
async def test_on_postgres_a_lone_restart_answers_the_killed_process_album_within_seconds(
    app_factory: AppFactory,
    tg: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
    migrated_postgres_url: str,
) -> None:
    """The one ``serve`` on PostgreSQL is killed (SIGKILL) in the second before its album was
    handled, and started again: the items name the killed process, whose heartbeat stopped,
    so the restart takes them on once it is silent (a few heartbeats), not after a minute."""
    vision_model(fake_llm, agent=ALBUM_ANSWER)
    settings = await album_then_kill(
        app_factory, tg, fake_llm, tmp_path, database_url_setting=migrated_postgres_url
    )
    killed = time.perf_counter()
    async with on_telegram(app_factory, fake_llm, settings):
        assert await tg.wait_texts(CHAT, 1, within=ORPHANED / 2) == [ALBUM_ANSWER]
        answered = time.perf_counter() - killed
    assert answered < ORPHANED / 3, answered  # measured: about 11 s (silent after 10 s)
    await run_a_while(app_factory, tg, fake_llm, settings)
    assert tg.texts(CHAT) == [ALBUM_ANSWER]


LIVE_QUIET = 20.0
"""The live process's album quiet: it holds the album that long, well past the moment a
process not seen would be taken for gone (``presence.SILENT_AFTER``, 10 s)."""


@pytest.mark.slow
@pytest.mark.postgres
async def test_on_postgres_a_second_process_leaves_a_live_process_album_to_it(
    app_factory: AppFactory,
    tg: FakeTelegram,
    fake_llm: FakeLLM,
    tmp_path: Path,
    migrated_postgres_url: str,
) -> None:
    """A ``serve`` holds an album (a long quiet) and beats on: a second process, looking
    every half second, never takes it over; the holder answers it, once."""
    vision_model(fake_llm, agent=ALBUM_ANSWER)

    async def second_process(settings: dict[str, Any]) -> None:
        sent = time.perf_counter()
        port = free_port()  # the live process listens on the first one
        hook = f"http://127.0.0.1:{port}/telegram/hook"
        own = {"telegram_webhook_port": port, "telegram_webhook_url": hook}
        async with on_telegram(app_factory, fake_llm, {**settings, **own}):
            await asyncio.sleep(LIVE_QUIET - 5 - (time.perf_counter() - sent))
            assert tg.texts(CHAT) == []  # still held by the live one: not taken over
            assert await tg.wait_texts(CHAT, 1, within=30) == [ALBUM_ANSWER]
            await asyncio.sleep(SETTLE)

    await album_then_kill(
        app_factory,
        tg,
        fake_llm,
        tmp_path,
        database_url_setting=migrated_postgres_url,
        serve_env={"LIFEBOT_TELEGRAM_ALBUM_QUIET": str(LIVE_QUIET)},
        meanwhile=second_process,
    )
    assert tg.texts(CHAT) == [ALBUM_ANSWER]
    assert len([b for b in fake_llm.chat_requests if b.get("tools")]) == 1


async def test_a_message_sent_right_after_an_album_comes_after_it(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    vision_model(fake_llm, agent="The password on the notes is sunflower42.")
    app = await telegram(vision=True)
    photos = [PHOTO + bytes([n]) * 8 for n in range(2)]
    for data in photos:
        await tg.send_photo(CHAT, data, media_group_id="79")
    await tg.send_text(CHAT, "and what about this one?")

    await tg.wait_texts(CHAT, 2)
    async with app.db.session() as s:
        rows = (await s.exec(select(Message).where(Message.direction == "in"))).all()
    assert [r.text for r in sorted(rows, key=lambda r: r.id or 0)] == [
        "",
        "and what about this one?",
    ]


async def test_an_image_file_on_telegram_is_kept_too(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    vision_model(fake_llm)
    app = await telegram(vision=True)

    await tg.send_photo(CHAT, PHOTO, document=True)

    [reply] = await tg.wait_texts(CHAT, 1)
    assert "sunflower42" in reply
    assert pictures_sent(fake_llm) == ["data:image/png;base64," + base64.b64encode(PHOTO).decode()]
    assert await stored(app) == [PHOTO]


async def test_an_oversized_photo_is_refused_in_plain_words_and_not_fetched(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await telegram(vision=True, image_max_bytes=1000)

    await tg.send_photo(CHAT, PHOTO)

    [reply] = await tg.wait_texts(CHAT, 1)
    assert "too big" in reply
    assert tg.calls_to("getFile") == []
    assert fake_llm.chat_requests == []


async def test_without_vision_the_photo_is_kept_and_described_later_by_reindex(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    app = await telegram()  # vision off: no model call may happen (the fake fails on any)

    await tg.send_photo(CHAT, PHOTO)

    [reply] = await tg.wait_texts(CHAT, 1)
    assert reply == NO_VISION.replace("`", "")  # the command is shown as code
    assert await stored(app) == [PHOTO]
    assert await found(app, "telegram", str(BOT_ID), str(CHAT), "wifi password") == []

    vision_model(fake_llm)
    env = {
        "LIFEBOT_DATA_DIR": str(app.settings.data_dir),
        "OPENAI_BASE_URL": fake_llm.url,
        "OPENAI_API_KEY": "test-key",
        "LIFEBOT_LLM_MODEL": "fake-smart",
        "LIFEBOT_VISION": "true",
    }
    code, out, err = await run_cli(
        "memory", "reindex", "--images", cwd=app.settings.data_dir.parent, env=env
    )
    assert code == 0, err
    assert "Described 1 message(s) with photos." in out
    assert pictures_sent(fake_llm) == [DATA_URL]
    hits = await found(app, "telegram", str(BOT_ID), str(CHAT), "wifi password")
    assert "sunflower42" in hits[0]


@pytest.fixture
async def slack(
    app_factory: AppFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> AsyncIterator[Slack]:
    """lifebot in HTTP mode with a vision model; Ana paired."""
    started = await start_slack(app_factory, fake_llm, fake_slack, "http", vision=True)
    await add_user(started.app, ANA, channel_name="slack", account=TEAM_ID)
    yield started
    await started.adapter.stop()


async def test_a_slack_image_is_described_and_found_by_memory_search(
    slack: Slack, fake_llm: FakeLLM
) -> None:
    vision_model(fake_llm)
    file = slack.fake.add_file(PHOTO, "IMG_0042.jpg", "image/jpeg")

    await slack.post(dm_event("", subtype="file_share", files=[file]))

    [reply] = slack.fake.texts(ANA_DM)
    assert "sunflower42" in reply
    assert slack.fake.file_downloads == [(file["id"], f"Bearer {BOT_TOKEN}")]
    assert pictures_sent(fake_llm) == [DATA_URL]
    assert await stored(slack.app) == [PHOTO]
    hits = await found(slack.app, "slack", TEAM_ID, ANA, "photo of the wifi password")
    assert "sunflower42" in hits[0]


async def test_photos_leave_with_an_export_and_go_with_the_user(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    vision_model(fake_llm)
    app = await telegram(vision=True)
    await tg.send_photo(CHAT, PHOTO)
    await tg.wait_texts(CHAT, 1)
    async with app.db.session() as s:
        ident = await UserRepo(s).find_identity("telegram", str(BOT_ID), str(CHAT))
    assert ident is not None

    await app.userdata.export(ident.user_id, tmp_path / "ana.zip")
    with zipfile.ZipFile(tmp_path / "ana.zip") as zf:
        [name] = [n for n in zf.namelist() if n.startswith("files/photos/")]
        assert zf.read(name) == PHOTO
    await app.userdata.delete(ident.user_id)

    assert await stored(app) == []


def test_a_big_photo_costs_the_context_budget_a_flat_amount() -> None:
    big = data_url(b"\xff" * 3_000_000, "image/jpeg")  # a 3 MB phone photo: 4 MB of base64
    msg = {"role": "user", "content": image_parts("What's on this receipt?", [big])}

    assert message_tokens(msg) < 1000  # so the conversation's history still fits beside it


async def test_a_strangers_photo_is_not_downloaded(
    telegram: Starter, tg: FakeTelegram, fake_llm: FakeLLM
) -> None:
    app = await telegram(vision=True)
    stranger = 777

    await tg.send_photo(stranger, PHOTO)

    [reply] = await tg.wait_texts(stranger, 1)
    assert "code" in reply.lower()  # the pairing answer, nothing about the picture
    assert tg.calls_to("getFile") == []
    assert await stored(app) == []
    assert fake_llm.chat_requests == []


async def test_doctor_checks_that_the_model_takes_pictures(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    off = await check_vision(make_settings(tmp_path, fake_llm))
    assert (off.ok, off.optional) == (False, True)
    fake_llm.add(say("Red."), Step(status=400))

    works = await check_vision(make_settings(tmp_path, fake_llm, vision=True))
    refused = await check_vision(make_settings(tmp_path, fake_llm, vision=True))

    assert works.ok
    assert not refused.ok and "did not take a picture" in refused.detail
    [first, _] = fake_llm.chat_requests
    assert first["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png;")
