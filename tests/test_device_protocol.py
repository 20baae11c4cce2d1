"""The pendant protocol over a real WebSocket: auth, bad input, limits, sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from bot.app.build import App
from bot.device import protocol as p
from storage.repos.devices import DeviceRepo
from tests.fakes.llm import FakeLLM, say
from tests.support.app import AppFactory
from tests.support.device import _closed, _frame, _open, add_device, running_device
from tests.support.speech import speak


async def test_bad_missing_and_revoked_tokens_are_closed_with_4401(
    app_factory: AppFactory,
) -> None:
    app = await app_factory(device_auth_timeout=0.5)
    _, token = await add_device(app, "pendant-a")
    async with running_device(app) as dev:
        async with _open(dev, "lbd_not-a-real-token") as ws:
            code, reason = await _closed(ws)
        assert code == p.CLOSE_UNAUTHORIZED and "token" in reason

        async with _open(dev) as ws:  # no header and no auth frame
            code, reason = await _closed(ws)
        assert code == p.CLOSE_UNAUTHORIZED and "auth" in reason

        async with _open(dev) as ws:  # the auth frame works when headers cannot be set
            await ws.send(json.dumps({"type": "auth", "token": token}))
            await ws.send(json.dumps({"type": "ping"}))
            assert (await _frame(ws))["type"] == "pong"

        async with app.db.session() as s:
            assert await DeviceRepo(s).revoke("pendant-a", app.clock.now()) is not None
        async with _open(dev, token) as ws:
            code, _ = await _closed(ws)
        assert code == p.CLOSE_UNAUTHORIZED


async def test_malformed_frames_get_error_frames_and_the_connection_stays(
    app: App, tmp_path: Path
) -> None:
    _, token = await add_device(app, "pendant-m")
    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send(b"\x00\x01" * 100)
        assert (await _frame(ws))["code"] == "audio_before_hello"
        await ws.send("{not json")
        assert (await _frame(ws))["code"] == "malformed_json"
        await ws.send(json.dumps({"type": "sing"}))
        assert (await _frame(ws))["code"] == "unknown_type"
        await ws.send(json.dumps({"no": "type"}))
        assert (await _frame(ws))["code"] == "missing_type"
        await ws.send(json.dumps({"type": "audio-start"}))
        assert (await _frame(ws))["code"] == "hello_first"
        await ws.send(json.dumps({"type": "hello", "codec": "mp3"}))
        assert (await _frame(ws))["code"] == "unsupported_codec"
        await ws.send(json.dumps({"type": "hello", "sample_rate": 96000}))
        assert (await _frame(ws))["code"] == "unsupported_rate"
        await ws.send(json.dumps({"type": "hello", "mode": "dream"}))
        assert (await _frame(ws))["code"] == "bad_mode"
        await ws.send(json.dumps({"type": "hello", "sample_rate": "fast"}))
        assert (await _frame(ws))["code"] == "bad_field"
        await ws.send(json.dumps({"type": "hello", "codec": "opus", "sample_rate": 44100}))
        assert (await _frame(ws))["code"] == "unsupported_rate"
        # After all that, the connection still works.
        await ws.send(json.dumps({"type": "hello", "mode": "ambient"}))
        ready = await _frame(ws)
        assert ready["type"] == "ready" and ready["mode"] == "ambient"
        await ws.send(json.dumps({"type": "audio-stop"}))
        assert (await _frame(ws, "error"))["code"] == "not_recording"
        await ws.send(json.dumps({"type": "opus", "codec": "x"}))
        assert (await _frame(ws, "error"))["code"] == "unknown_type"


async def test_frames_over_the_size_limit_close_the_socket(app_factory: AppFactory) -> None:
    app = await app_factory(device_max_frame_bytes=4096)
    _, token = await add_device(app, "pendant-big")
    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send(json.dumps({"type": "hello"}))
        await _frame(ws, "ready")
        await ws.send(b"\x00" * 10_000)
        code, _ = await _closed(ws)
    assert code == 1009  # "message too big", from the WebSocket layer


async def test_a_silent_device_is_closed_after_the_idle_timeout(app_factory: AppFactory) -> None:
    app = await app_factory(device_idle_timeout=0.5)
    _, token = await add_device(app, "pendant-idle")
    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send(json.dumps({"type": "hello"}))
        await _frame(ws, "ready")
        code, reason = await _closed(ws)
    assert code == p.CLOSE_IDLE and "nothing received" in reason


async def test_a_reconnecting_device_continues_its_session(app: App, tmp_path: Path) -> None:
    _, token = await add_device(app, "pendant-r")
    first = speak("Buy more coffee beans", tmp_path / "r1.wav")
    second = speak("Pick up the laundry after work", tmp_path / "r2.wav")
    async with running_device(app) as dev:
        one = await dev.sim(first, token, mode="ambient")
        two = await dev.sim(second, token, mode="ambient")
        three = await dev.sim(second, token, mode="ambient", session_id=one.session_id)
    assert one.session_id == two.session_id == three.session_id
    assert [f["resumed"] for f in (one.of("ready") + two.of("ready"))] == [False, True]
    one_seg = one.of("transcript")[-1]
    two_seg = two.of("transcript")[-1]
    # The second utterance continues the session's timeline after the first.
    assert two_seg["start"] >= one_seg["end"]
    assert two_seg["segment_id"] != one_seg["segment_id"]
    assert "coffee" in one.transcripts[0].lower()
    assert "laundry" in two.transcripts[0].lower()


async def test_a_newer_connection_replaces_the_older_one(app: App) -> None:
    _, token = await add_device(app, "pendant-twice")
    async with running_device(app) as dev, _open(dev, token) as old:
        await old.send(json.dumps({"type": "hello"}))
        await _frame(old, "ready")
        async with _open(dev, token) as new:
            await new.send(json.dumps({"type": "ping"}))
            await _frame(new, "pong")
            code, _ = await _closed(old)
    assert code == p.CLOSE_REPLACED


async def test_a_typed_question_is_answered_and_ping_gets_pong(app: App, fake_llm: FakeLLM) -> None:
    _, token = await add_device(app, "pendant-t")
    fake_llm.default = lambda body: say("Tea is ready.")
    async with running_device(app) as dev, _open(dev, token) as ws:
        await ws.send(json.dumps({"type": "hello", "mode": "ambient"}))
        await _frame(ws, "ready")
        await ws.send(json.dumps({"type": "ping"}))
        assert (await _frame(ws))["type"] == "pong"
        await ws.send(json.dumps({"type": "text", "text": "is the tea ready?", "id": "q1"}))
        reply = await _frame(ws, "reply")
    assert reply["text"] == "Tea is ready."
    assert reply["citations"] == []


async def test_unknown_paths_are_refused(app: App) -> None:
    await add_device(app, "pendant-p")
    async with running_device(app) as dev:
        with pytest.raises(Exception, match="404"):
            async with connect(dev.url.replace("/v1/device", "/other"), proxy=None):
                pass


async def test_revoking_a_connected_device_disconnects_it(app: App) -> None:
    _, token = await add_device(app, "pendant-gone")
    async with running_device(app, revoke_check_seconds=0.0) as dev, _open(dev, token) as ws:
        await ws.send(json.dumps({"type": "hello"}))
        await _frame(ws, "ready")
        async with app.db.session() as s:
            await DeviceRepo(s).revoke("pendant-gone", app.clock.now())
        await ws.send(json.dumps({"type": "ping"}))
        code, reason = await _closed(ws)
    assert code == p.CLOSE_UNAUTHORIZED and "revoked" in reason


async def test_a_device_given_to_someone_else_never_continues_the_old_session(
    app: App,
) -> None:
    alice, token = await add_device(app, "pendant-shared")
    async with running_device(app) as dev:
        async with _open(dev, token) as ws:
            await ws.send(json.dumps({"type": "hello"}))
            old = (await _frame(ws, "ready"))["session_id"]
        async with app.db.session() as s:
            await DeviceRepo(s).revoke("pendant-shared", app.clock.now())
        bob, _ = await add_device(app, "pendant-bob")
        async with app.db.session() as s:
            _, token = await DeviceRepo(s).add(bob.id or 0, "pendant-shared")
        async with _open(dev, token) as ws:
            await ws.send(json.dumps({"type": "hello", "session_id": old}))
            ready = await _frame(ws, "ready")
    assert ready["session_id"] != old and ready["resumed"] is False
    assert alice.id != bob.id
