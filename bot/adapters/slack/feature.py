"""Slack's declaration: its credentials never reach a log line (issue 28)."""

from __future__ import annotations

from bot.feature import Feature, FileKind, Secret

FEATURE = Feature(
    name="slack",
    about="The Slack channel: DMs and mentions, audio clips and pictures, threads.",
    files=(
        FileKind(
            "slack-audio",
            "audio clips being transcribed (deleted once read)",
            per_user=False,
            derived=True,
        ),
    ),
    secrets=(
        Secret("Slack bot token", setting="slack_bot_token"),
        Secret("Slack app token", setting="slack_app_token"),
        Secret("Slack signing secret", setting="slack_signing_secret"),
        Secret(
            "a Slack token",
            shape=r"(xox[abposr]-|xapp-)[A-Za-z0-9\-]{8,}",
            example="token=xoxb-2741-99120-s1ackB0tT0kenVa1ue",
        ),
    ),
)
