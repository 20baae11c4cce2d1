"""Start the channels and background services that the settings ask for."""

from __future__ import annotations

import logging

from bot.adapters.slack import SlackAdapter
from bot.adapters.telegram import TelegramAdapter, TelegramConfig
from bot.composition import App

log = logging.getLogger(__name__)


async def start_channels(app: App) -> list[str]:
    """Start every configured channel; return their names (empty: none configured).

    Each channel issue adds its adapter here.
    """
    started: list[str] = []
    if app.settings.telegram_enabled:
        telegram = TelegramAdapter(
            TelegramConfig.from_settings(app.settings),
            clock=app.clock,
            menu=app.commands.menu(),
            transcriber=app.extras.get("transcriber"),
        )
        app.dispatcher.register(telegram)
        await telegram.start(app.dispatcher.handle)
        app.adapters.append(telegram)
        started.append("telegram")
    if app.settings.slack_enabled:
        slack = SlackAdapter.from_settings(
            app.settings, app.clock, transcriber=app.extras.get("transcriber")
        )
        app.dispatcher.register(slack)
        await slack.start(app.dispatcher.handle)
        app.adapters.append(slack)
        started.append("slack")
    # The pendant: served whenever a device exists or LIFEBOT_DEVICE_ENABLED=true.
    from bot.device.adapter import start_device_channel  # noqa: PLC0415  # loads audio libs

    if await start_device_channel(app):
        started.append("device")
    # Memory's background pass: index other paths' messages, extract from quiet chats.
    if "memory" in app.extras:
        app.extras["memory"].start()
    # Scheduled jobs (briefings, reminders, proposals): only the leader process runs them.
    if app.settings.jobs_enabled and "jobs" in app.extras:
        await app.extras["jobs"].service.start()
    return started
