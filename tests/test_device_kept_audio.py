"""Audio kept with LIFEBOT_DEVICE_KEEP_AUDIO leaves this host's spool for the file store once
its session is finished (issue 28): any process can export or back it up, and the spool cap
still bounds it."""

from __future__ import annotations

import zipfile
from pathlib import Path

from bot.app.build import App
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


async def test_a_finished_sessions_kept_audio_moves_into_the_store_and_is_exported(
    app_factory: AppFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    app = await app_factory(fake_llm, device_keep_audio=True)
    user, token = await add_device(app, "kitchen")
    assert user.id is not None
    clip = speak("The plumber will come on Thursday afternoon", tmp_path / "a.wav")
    async with running_device(app) as dev:
        done = await dev.sim(clip, token, mode="ambient")
        assert done.session_id
        spooled = dev.adapter.hub.spool.path(done.session_id)
        audio = spooled.read_bytes()
    # The session is over (its device moved on); the next start settles it.
    await _close(app, done.session_id)
    async with running_device(app):
        pass
    key = f"{user.id}/{done.session_id}.pcm"
    assert not spooled.exists()
    assert await app.files.get("device-audio", key) == audio

    await app.userdata.export(user.id, tmp_path / "out.zip")
    with zipfile.ZipFile(tmp_path / "out.zip") as zf:
        assert zf.read(f"files/device-audio/{key}") == audio

    # The cap counts kept audio and frees it when it needs room.
    async with running_device(app) as dev:
        keeper = dev.adapter.keeper
        keeper.cap = len(audio) - 1
        usage = await keeper.check()
    assert usage.freed == len(audio)
    assert await app.files.stat("device-audio", key) is None
