"""The spool's disk cap (issue 23): transcribed audio goes first, oldest first; audio not yet
transcribed never; at the cap new audio is refused with storage_full, after a warning."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from bot.app.build import App
from bot.device.hub import DeviceHub
from storage.repos.devices import SessionRepo
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory
from tests.support.device import add_device, running_device
from tests.support.speech import speak


async def _close(app: App, session_id: str) -> None:
    async with app.db.session() as s:
        row = await SessionRepo(s).get(session_id)
        assert row is not None
        row.closed_at = app.clock.now()
        s.add(row)


async def _until_processed(hub: DeviceHub, *session_ids: str, within: float = 30.0) -> None:
    """Wait until each session is out of memory and every utterance of it is transcribed.

    The simulator returns when the device has sent its audio; on a loaded machine the last
    utterance can still be in the model, and the cap rightly keeps audio in that state.
    """
    deadline = time.monotonic() + within
    while True:
        pending = []
        async with hub.db.session() as s:
            repo = SessionRepo(s)
            for sid in session_ids:
                row = await repo.get(sid)
                waiting, _ = await repo.count_unfinished(sid)
                behind = row is None or hub.spool.samples(sid) > row.vad_cursor
                if sid in hub.sessions or waiting or behind:
                    pending.append(sid)
        if not pending:
            return
        assert time.monotonic() < deadline, f"sessions still being transcribed: {pending}"
        await asyncio.sleep(0.1)


async def test_processed_audio_goes_oldest_first_and_then_new_audio_is_refused(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Keep audio after transcription, so processed files stay until the cap needs room.
    app = await app_factory(fake_llm, device_keep_audio=True, device_spool_max_mb=0.25)
    _, old_token = await add_device(app, "old")
    _, new_token = await add_device(app, "new")
    clip = speak("The plumber will come on Thursday afternoon", tmp_path / "a.wav")

    async with running_device(app) as dev:
        old = await dev.sim(clip, old_token, mode="ambient")
        new = await dev.sim(clip, new_token, mode="ambient")
        assert old.session_id and new.session_id
        # Both are transcribed and out of memory before they are closed, so their files stay
        # in the spool (a closed session retired later would have its audio moved to the store).
        await _until_processed(dev.adapter.hub, old.session_id, new.session_id)
        await _close(app, old.session_id)
        await _close(app, new.session_id)
        spool = dev.adapter.hub.spool
        old_size = spool.path(old.session_id).stat().st_size
        keeper = dev.adapter.keeper
        # The test runs the checks itself: the 30-second background pass, on a slow machine,
        # would otherwise free the oldest file first, under the cap set below.
        await keeper.stop()

        total = old_size + spool.path(new.session_id).stat().st_size

        keeper.cap = int(total / 0.85)  # 85 % used: a warning, nothing deleted yet
        with caplog.at_level(logging.INFO, logger="bot.device.spool_cap"):
            usage = await keeper.check()
        assert usage.freed == 0 and spool.path(old.session_id).exists()
        assert any("85%" in r.message for r in caplog.records if r.levelno == logging.WARNING)

        keeper.cap = total - 1  # over the cap: the oldest processed audio goes, only that
        usage = await keeper.check()
        assert usage.freed == old_size and not usage.full
        assert not spool.path(old.session_id).exists()
        assert spool.path(new.session_id).exists()

        # Audio not yet transcribed is never deleted: an open session's file stays.
        third = await dev.sim(clip, old_token, mode="ambient")
        assert third.session_id
        keeper.cap = 1000
        usage = await keeper.check()
        assert usage.full and spool.full
        assert spool.path(third.session_id).exists()
        assert not spool.path(new.session_id).exists()  # processed and closed: freed

        refused = await dev.sim(clip, new_token, mode="ambient", wait_seconds=5)
        assert "storage_full" in [f["code"] for f in refused.of("error")]
