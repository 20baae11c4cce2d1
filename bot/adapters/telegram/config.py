"""The Telegram adapter's options (the composition root builds them from the settings)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TelegramConfig:
    """The adapter's options (the Telegram section of the README names each setting)."""

    token: str
    api_url: str = "https://api.telegram.org/bot"
    file_url: str | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = 8443
    allow_groups: bool = False
    max_voice_bytes: int = 20_000_000
    max_image_bytes: int = 10_000_000
    poll_timeout: float = 10.0
    edit_interval: float = 1.2
    retries: int = 3
    album_quiet: float = 1.0
    """Seconds of silence that end an album (``albums.ALBUM_QUIET``)."""
    album_recover_every: float = 5.0
    """Seconds between looks for album items a stopped process left (``albums.RECOVER_EVERY``)."""
    workdir: Path | None = None

    @property
    def derived_webhook_secret(self) -> str:
        """The webhook secret: the setting, or one derived from the bot token.

        Every process behind one load balancer shares the token, so each derives the same
        secret and any of them accepts any update (a random one per process made all but the
        last to start answer 401). Derived one way (HMAC), it does not reveal the token.
        """
        if self.webhook_secret:
            return self.webhook_secret
        return hmac.new(
            self.token.encode(), b"lifebot telegram webhook secret", hashlib.sha256
        ).hexdigest()

    @property
    def base_file_url(self) -> str:
        """Where files are downloaded from (``.../file/bot`` next to the API URL)."""
        if self.file_url:
            return self.file_url
        base = self.api_url.removesuffix("/")
        return base[: -len("/bot")] + "/file/bot" if base.endswith("/bot") else base + "/file/bot"


@dataclass(frozen=True, slots=True)
class AlbumHolder:
    """This process as the holder of the album items it takes on (``inbox``).

    Each item names its process; another process takes it over at once when that one's
    heartbeat row says it stopped, or it has not been seen for ``silent_after`` seconds.
    """

    process_id: str
    """This process's heartbeat row (``lifebotprocess``), ``host:pid:random``."""
    silent_after: float
    """Seconds without a heartbeat after which a process is taken for gone (dead or frozen)."""


async def probe(config: TelegramConfig) -> str:
    """Ask the Bot API who the bot is (for ``lifebot doctor``); raise ChannelError if it fails."""
    from telegram import Bot  # noqa: PLC0415  (the doctor stays fast when Telegram is off)
    from telegram.error import TelegramError  # noqa: PLC0415

    from bot.adapters.telegram.send import translate  # noqa: PLC0415

    bot = Bot(config.token, base_url=config.api_url, base_file_url=config.base_file_url)
    try:
        async with bot:
            info = await bot.get_webhook_info()
    except TelegramError as exc:
        raise translate(exc, "getMe") from None
    mode = f"webhook {config.webhook_url}" if config.webhook_url else "long polling"
    if info.url and not config.webhook_url:
        mode += f" (a webhook {info.url} is set; polling removes it at start)"
    return f"@{bot.username}, {mode}"
