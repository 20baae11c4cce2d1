"""Builds the web room from the app's collaborators (called by the composition root)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from fastapi import FastAPI

from bot.adapters.base import ChannelAdapter
from bot.agent.journal.service import JournalService
from bot.agent.memory.service import MemoryService
from bot.clock import Clock
from bot.config import Settings
from bot.dispatch.commands import Commands
from bot.jobs.service import Jobs
from bot.location.service import LocationService
from bot.web.app import create_app
from bot.web.auth import KeySource, WebAuth
from bot.web.commands import register_web_commands
from bot.web.deps import WebContext, make_templates
from bot.web.server import WebServer
from bot.web.service import WebService
from storage.db import Database


@dataclass
class WebRoom:
    """The web app, its auth and the server that runs it."""

    auth: WebAuth
    service: WebService
    app: FastAPI
    server: WebServer

    async def start(self) -> None:
        """Serve the page (LIFEBOT_WEB_HOST:LIFEBOT_WEB_PORT)."""
        await self.server.start()

    async def stop(self) -> None:
        """Stop serving."""
        await self.server.stop()


def build_web(
    settings: Settings,
    *,
    db: Database,
    clock: Clock,
    memory: MemoryService,
    jobs: Jobs,
    channels: Mapping[str, ChannelAdapter],
    commands: Commands,
    location: LocationService,
    journal: JournalService,
) -> WebRoom:
    """Wire the web room and register /web (no I/O)."""
    auth = WebAuth(
        db,
        clock,
        KeySource(settings.web_secret, settings.data_dir / "web_secret"),
        settings.web_url,
        timedelta(days=settings.web_session_days),
    )
    service = WebService(db, clock, memory, jobs, channels, settings.default_timezone, journal)
    context = WebContext(
        service=service,
        auth=auth,
        templates=make_templates(),
        secure_cookies=settings.web_url.startswith("https://"),
        jobs_enabled=settings.jobs_enabled,
        location=location,
    )
    register_web_commands(commands, auth)
    app = create_app(context)
    return WebRoom(auth, service, app, WebServer(app, settings.web_host, settings.web_port))
