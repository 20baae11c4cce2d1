"""Telegram's declaration: its credentials never reach a log line (issue 28)."""

from __future__ import annotations

from bot.feature import Feature, FileKind, Secret

FEATURE = Feature(
    name="telegram",
    about="The Telegram channel: DMs, groups that mention lifebot, voice notes and photos.",
    files=(
        FileKind(
            "telegram-voice",
            "voice notes being transcribed (deleted once read)",
            per_user=False,
            derived=True,
        ),
    ),
    secrets=(
        Secret("Telegram bot token", setting="telegram_bot_token"),
        Secret("Telegram webhook secret", setting="telegram_webhook_secret"),
        # The Bot API puts the token in every request path: /bot<id>:<secret>/sendMessage.
        Secret(
            "a Telegram bot token",
            shape=r"(\d{5,}:)[A-Za-z0-9_\-]{30,}",
            example="POST /bot7012345678:AAF-teLegramT0kenSecretPartXYZ123456/getUpdates",
        ),
    ),
)
