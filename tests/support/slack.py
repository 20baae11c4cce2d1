"""Helpers shared by the Slack tests: who Ana is, a running lifebot with Slack, scripted answers.

The ``fake_slack`` fixture lives in tests/conftest.py; these are plain functions and types.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # a dev dependency without stubs

from bot.adapters.slack.adapter import SlackAdapter
from bot.app.build import App, start_channels
from bot.speech.transcribe import Transcriber
from tests.fakes.llm import FakeLLM, Step
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, TEAM_ID, FakeSlack
from tests.support.app import AppFactory, add_user
from tests.support.speech import shared_transcriber, speak

ANA, ANA_DM = "U0ANA", "D0ANA"
"""Ana's Slack user id and her DM channel with the bot."""


@dataclass
class Slack:
    """One running lifebot with the Slack channel, and the fake Slack it talks to."""

    app: App
    adapter: SlackAdapter
    fake: FakeSlack

    @property
    def url(self) -> str:
        assert self.adapter.http_url is not None
        return self.adapter.http_url

    async def post(self, body: dict[str, Any], **kw: Any) -> int:
        """Deliver over HTTP, wait until lifebot has handled it; the HTTP status."""
        status, _, _ = await self.fake.post_event(self.url, body, **kw)
        assert await self.adapter.wait_idle(20)
        return status

    async def deliver(self, body: dict[str, Any], **kw: Any) -> float:
        """Deliver over Socket Mode, wait for the ack and the handling; seconds to ack."""
        eid = await self.fake.deliver(body, **kw)
        ack = await self.fake.wait_ack(eid)
        assert await self.adapter.wait_idle(20)
        return ack.seconds


async def start_slack(
    app_factory: AppFactory,
    fake_llm: FakeLLM,
    fake: FakeSlack,
    mode: str,
    transcriber: Transcriber | None = None,
    **overrides: Any,
) -> Slack:
    """Start lifebot with Slack configured (through serve.start_channels, as in production).

    ``transcriber`` replaces the composition root's one (tests share one loaded model).
    """
    settings: dict[str, Any] = {
        "slack_bot_token": BOT_TOKEN,
        "slack_app_token": APP_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_mode": mode,
        "slack_http_port": 0,
        "slack_api_url": fake.api_url,
        "slack_stream_interval": 0.5,
        # Scheduled jobs are another feature with their own tests; here they only add noise.
        "jobs_enabled": False,
        **overrides,
    }
    app = await app_factory(fake_llm, transcriber=transcriber, **settings)
    assert await start_channels(app) == ["slack"]
    adapter = app.dispatcher.adapters["slack"]
    assert isinstance(adapter, SlackAdapter)
    return Slack(app, adapter, fake)


MANIFEST = Path(__file__).resolve().parents[2] / "docs" / "slack-app-manifest.yaml"


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return data


def answer(llm: FakeLLM, *steps: Step) -> None:
    """The smart model (the agent) gives these answers in order.

    Other features' fast-model calls (routing, proposal detection after a turn) get an empty
    JSON object, so they never eat the agent's scripted answers.
    """
    queue = list(steps)

    def respond(body: dict[str, Any]) -> Step | None:
        if body.get("model") != "fake-smart":
            return Step(text="{}")
        return queue.pop(0) if queue else None  # one more agent call than scripted: a failure

    llm.default = respond


def asked_of(llm: FakeLLM) -> list[dict[str, Any]]:
    """The agent's (smart model) chat requests, in order."""
    return [r for r in llm.chat_requests if r.get("model") == "fake-smart"]


async def start_voice(
    app_factory: AppFactory, fake_llm: FakeLLM, fake: FakeSlack, **overrides: Any
) -> Slack:
    """lifebot in HTTP mode with the real speech model (loaded once per run), Ana paired."""
    slack = await start_slack(
        app_factory, fake_llm, fake, "http", transcriber=shared_transcriber(), **overrides
    )
    await add_user(slack.app, ANA, channel_name="slack", account=TEAM_ID)
    return slack


def ogg_clip(text: str, tmp_path: Path) -> bytes:
    wav = speak(text, tmp_path / "clip.wav")
    sox = shutil.which("sox")
    assert sox
    ogg = tmp_path / "clip.ogg"
    subprocess.run([sox, str(wav), str(ogg)], check=True)
    return ogg.read_bytes()
