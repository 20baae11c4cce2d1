"""Hardening (#18) item 10: an unusable spool gets an error frame with a code, the connection
stays, and `doctor` no longer says "data dir: ok"."""

from __future__ import annotations

import json
from pathlib import Path

from bot.app.build import App
from bot.app.doctor import run_doctor
from tests.support.app import make_settings
from tests.support.device import _frame, _open, add_device, running_device


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
