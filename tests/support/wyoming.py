"""Helpers for the Wyoming tests: the service on a free port, as Home Assistant reaches it."""

from __future__ import annotations

from typing import Any

from bot.app.build import App, start_wyoming
from bot.device.wyoming import WyomingService
from bot.speech.fair import FairTranscriber
from tests.fakes.llm import FakeLLM
from tests.support.app import AppFactory, add_user
from tests.support.speech import shared_transcriber


async def wyoming_app(app_factory: AppFactory, fake_llm: FakeLLM, **settings: Any) -> App:
    """An app serving Wyoming on a free loopback port for the users ana and bob."""
    settings = {"wyoming_enabled": True, "wyoming_port": 0, "wyoming_user": "ana", **settings}
    app = await app_factory(fake_llm, transcriber=shared_transcriber(), **settings)
    await add_user(app, "ana-chat", name="ana")
    await add_user(app, "bob-chat", name="bob")
    await start_wyoming(app, FairTranscriber(app.transcriber))
    return app


def service(app: App) -> WyomingService:
    """The running Wyoming service."""
    found = app.channels["wyoming"]
    assert isinstance(found, WyomingService)
    return found
