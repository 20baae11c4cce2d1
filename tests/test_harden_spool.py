"""Hardening (#18) item 10, (#29) item 4: an unusable or full spool gets an error frame with a
code, the connection stays, the pendant's owner is told once through the outbox, and `doctor`
no longer says "data dir: ok"."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import select

from bot.app.build import App
from bot.app.doctor import run_doctor
from storage.models import Delivery
from tests.fakes.channel import RecordingChannel
from tests.fakes.clock import ManualClock
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user, channel, make_settings
from tests.support.device import _frame, _open, add_device, running_device
from tests.support.jobs import jobs_of


async def test_an_unwritable_spool_gets_an_error_frame_and_the_socket_stays(app: App) -> None:
    _, token = await add_device(app, "pendant-s")
    spool = app.settings.data_dir / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    spool.rmdir()
    spool.write_text("not a folder")  # as unusable as a full or read-only disk

    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send(json.dumps({"type": "hello"}))
        error = await _frame(ws)
        assert error["type"] == "error" and error["code"] == "storage_unavailable"
        await ws.send(json.dumps({"type": "ping"}))
        assert (await _frame(ws))["type"] == "pong"  # still connected


async def test_doctor_reports_an_unwritable_spool(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    settings.data_dir.mkdir(parents=True)
    (settings.data_dir / "spool").write_text("not a folder")
    lines: list[str] = []

    await run_doctor(settings, lines.append)

    [data] = [line for line in lines if line.startswith("data dir:")]
    assert "PROBLEM" in data and "spool" in data


async def _pushes(app: App) -> list[Delivery]:
    async with app.db.session() as s:
        rows = (await s.exec(select(Delivery).where(Delivery.kind == "notice"))).all()
    return [r for r in rows if (r.key or "").startswith("spool-problem:")]


def _midday() -> ManualClock:
    """A clock outside anyone's quiet hours: the notice is not urgent, so at night it waits
    for the morning (the suite must not depend on the hour it runs at)."""
    return ManualClock(datetime(2026, 3, 4, 12, 0, tzinfo=UTC))


async def test_an_unwritable_spool_tells_the_owner_once_through_the_outbox(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm, clock=_midday())
    app.dispatcher.register(RecordingChannel("fake"))
    ana = await add_user(app, "ana")
    _, token = await add_device(app, "pendant-o", ana)
    spool = app.settings.data_dir / "spool"
    spool.parent.mkdir(parents=True, exist_ok=True)
    spool.write_text("not a folder")

    async with running_device(app) as dev:
        for _ in range(2):  # two connections, many refused frames
            async with _open(dev, token) as ws:
                for _ in range(3):
                    await ws.send(json.dumps({"type": "hello"}))
                    assert (await _frame(ws, "error"))["code"] == "storage_unavailable"
        await jobs_of(app).plan_and_send(app.clock.now())

    [push] = await _pushes(app)
    assert push.status == "delivered"
    assert channel(app).texts("ana") == [
        "Your pendant pendant-o is connected, but I cannot store its audio right now (the "
        "folder it goes to cannot be written). It was told to keep its recordings and send them "
        "again later. Whoever runs lifebot can see what is wrong with `lifebot doctor`."
    ]


async def test_a_full_spool_refuses_audio_and_tells_the_owner_once(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm, clock=_midday(), device_spool_max_mb=0.001)  # 1,000 bytes
    app.dispatcher.register(RecordingChannel("fake"))
    ana = await add_user(app, "ana")
    _, token = await add_device(app, "pendant-full", ana)
    spool = app.settings.data_dir / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    (spool / "waiting.pcm").write_bytes(b"\0" * 4000)  # audio nobody has transcribed yet

    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send(json.dumps({"type": "hello", "codec": "pcm16", "sample_rate": 16000}))
        await _frame(ws, "ready")
        codes = []
        for _ in range(5):
            await ws.send(b"\0" * 3200)
            codes.append((await _frame(ws, "error"))["code"])
        await jobs_of(app).plan_and_send(app.clock.now())

    assert codes == ["storage_full"] * 5
    assert len(await _pushes(app)) == 1
    assert channel(app).texts("ana") == [
        "Your pendant pendant-full is connected, but I cannot store its audio right now (there "
        "is no room left for it). It was told to keep its recordings and send them again later. "
        "Whoever runs lifebot can see what is wrong with `lifebot doctor`."
    ]


async def test_doctor_reports_a_spool_at_its_cap(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, device_spool_max_mb=0.001)
    spool = settings.data_dir / "spool"
    spool.mkdir(parents=True)
    (spool / "waiting.pcm").write_bytes(b"\0" * 4000)
    lines: list[str] = []

    await run_doctor(settings, lines.append)

    [data] = [line for line in lines if line.startswith("data dir:")]
    assert "PROBLEM" in data and "the audio spool is full" in data
    assert "LIFEBOT_DEVICE_SPOOL_MAX_MB" in "\n".join(lines)
