"""The Slack adapter's options (the composition root builds them from the settings)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SlackOptions:
    """How the Slack adapter connects and what it takes (the Slack section of the README)."""

    bot_token: str
    """SLACK_BOT_TOKEN (``xoxb-``)."""
    app_token: str | None = None
    """SLACK_APP_TOKEN (``xapp-``), for Socket Mode."""
    signing_secret: str | None = None
    """SLACK_SIGNING_SECRET, for HTTP mode."""
    mode: str = "socket"
    """``socket`` (no public URL needed) or ``http`` (the Events API)."""
    api_url: str = "https://slack.com/api/"
    """The Web API's base URL."""
    http_host: str = "127.0.0.1"
    http_port: int = 3000
    http_path: str = "/slack/events"
    spool_dir: Path = Path("data/slack-audio")
    """Where voice files wait while they are transcribed (a ``derived`` file kind)."""
    max_audio_bytes: int = 25_000_000
    max_image_bytes: int = 10_000_000
    stream_interval: float = 1.5
    """Seconds between edits of a reply being streamed."""
    drain_seconds: float = 10.0
    """On stop, how long events being handled may take to finish."""
