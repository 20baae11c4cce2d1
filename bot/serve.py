"""Start the channels and background services that the settings ask for."""

from __future__ import annotations

import logging

from bot.composition import App

log = logging.getLogger(__name__)


async def start_channels(app: App) -> list[str]:
    """Start every configured channel; return their names (empty: none configured).

    Each channel issue adds its adapter here.
    """
    started: list[str] = []
    return started
