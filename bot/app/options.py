"""Settings become each room's own typed options here, and only here.

Rooms never import ``bot.config``: each declares the few values it reads as a small frozen
dataclass (or constructor arguments), and these functions fill them from ``Settings``. A
room's tests then build its options directly, and a setting's name can change without any
room noticing. Each function imports its room lazily: a CLI command that builds one room
(``doctor``, ``memory search``) loads only that room.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.config import Settings, environment

if TYPE_CHECKING:
    from bot.adapters.slack.config import SlackOptions
    from bot.adapters.telegram.config import TelegramConfig
    from bot.agent.memory.embeddings import Embedder
    from bot.device.options import DeviceOptions
    from bot.mcp.client.config import ClientSettings
    from bot.speech.transcribe import FasterWhisperTranscriber
    from bot.web.room import WebOptions


def web_options(settings: Settings) -> WebOptions:
    """What the web room reads (``LIFEBOT_WEB_*``)."""
    from bot.web.room import WebOptions  # noqa: PLC0415

    return WebOptions(
        host=settings.web_host,
        port=settings.web_port,
        url=settings.web_url,
        secret=settings.web_secret,
        secret_file=settings.data_dir / "web_secret",
        session_days=settings.web_session_days,
        default_timezone=settings.default_timezone,
        max_upload_bytes=settings.image_max_bytes,
        jobs_enabled=settings.jobs_enabled,
    )


def device_options(settings: Settings) -> DeviceOptions:
    """The pendant channel's options (``LIFEBOT_DEVICE_*``).

    The socket caps fit the process's open-file limit.
    """
    from bot.device.options import DeviceOptions, open_file_limit, socket_caps  # noqa: PLC0415

    waiting, devices = socket_caps(open_file_limit())
    return DeviceOptions(
        max_unauthenticated=waiting,
        max_devices=devices,
        spool_dir=settings.data_dir / "spool",
        max_frame_bytes=settings.device_max_frame_bytes,
        max_session_seconds=settings.device_max_session_seconds,
        idle_timeout=settings.device_idle_timeout,
        auth_timeout=settings.device_auth_timeout,
        resume_seconds=settings.device_resume_seconds,
        vad_silence_ms=settings.device_vad_silence_ms,
        max_utterance_seconds=settings.device_max_utterance_seconds,
        keep_audio=settings.device_keep_audio,
        wake_phrase=settings.device_wake_phrase,
        stt_workers=settings.stt_workers,
        partials=settings.device_partials,
        early_final=settings.device_early_final,
    )


def transcriber_for(settings: Settings) -> FasterWhisperTranscriber:
    """The speech model the ``LIFEBOT_STT_*`` settings choose (nothing is loaded yet)."""
    from bot.speech.transcribe import FasterWhisperTranscriber  # noqa: PLC0415

    return FasterWhisperTranscriber(
        settings.stt_model,
        device=settings.stt_device,
        compute_type=settings.stt_compute_type,
        cpu_threads=settings.stt_threads,
        workers=settings.stt_workers,
        beam_size=settings.stt_beam_size,
        pack=settings.stt_pack,
    )


def embedder_for(settings: Settings) -> Embedder:
    """The embedder the settings choose (an endpoint, or the local model; nothing loads yet)."""
    from bot.agent.memory.embeddings import build_embedder  # noqa: PLC0415  # numpy only

    return build_embedder(
        settings.embeddings_model,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        timeout=settings.llm_timeout,
    )


def telegram_config(settings: Settings) -> TelegramConfig:
    """The Telegram adapter's options (the token must be set)."""
    from bot.adapters.telegram.config import TelegramConfig  # noqa: PLC0415
    from storage.files.local import local_folder  # noqa: PLC0415

    assert settings.telegram_bot_token is not None
    return TelegramConfig(
        token=settings.telegram_bot_token,
        api_url=settings.telegram_api_url,
        file_url=settings.telegram_file_url,
        webhook_url=settings.telegram_webhook_url,
        webhook_secret=settings.telegram_webhook_secret,
        webhook_listen=settings.telegram_webhook_listen,
        webhook_port=settings.telegram_webhook_port,
        allow_groups=settings.telegram_allow_groups,
        max_voice_bytes=settings.telegram_max_voice_bytes,
        max_image_bytes=settings.image_max_bytes,
        poll_timeout=settings.telegram_poll_timeout,
        edit_interval=settings.telegram_edit_interval,
        retries=settings.telegram_retries,
        album_quiet=settings.telegram_album_quiet,
        album_recover_every=settings.telegram_album_recover_every,
        workdir=local_folder(settings.data_dir, "telegram-voice"),  # its declared FileKind
    )


def slack_options(settings: Settings) -> SlackOptions:
    """The Slack adapter's options (``SLACK_*`` / ``LIFEBOT_SLACK_*``; the bot token is set)."""
    from bot.adapters.slack.config import SlackOptions  # noqa: PLC0415  # no Bolt
    from storage.files.local import local_folder  # noqa: PLC0415

    assert settings.slack_bot_token is not None
    return SlackOptions(
        bot_token=settings.slack_bot_token,
        app_token=settings.slack_app_token,
        signing_secret=settings.slack_signing_secret,
        mode=settings.slack_mode,
        api_url=settings.slack_api_url,
        http_host=settings.slack_http_host,
        http_port=settings.slack_http_port,
        http_path=settings.slack_http_path,
        spool_dir=local_folder(settings.data_dir, "slack-audio"),  # its declared FileKind
        max_audio_bytes=settings.slack_max_audio_bytes,
        max_image_bytes=settings.image_max_bytes,
        stream_interval=settings.slack_stream_interval,
        drain_seconds=settings.slack_drain_seconds,
    )


def mcp_client_settings(settings: Settings, known_intents: frozenset[str]) -> ClientSettings:
    """Where the operator's MCP servers are configured (``LIFEBOT_MCP_*``).

    ``known_intents`` are the intent groups the registered features declare.
    """
    from bot.mcp.client.config import ClientSettings  # noqa: PLC0415

    return ClientSettings(
        servers_file=settings.mcp_servers_file,
        deadline=settings.mcp_call_timeout,
        log_dir=settings.data_dir / "mcp",
        environment=environment,
        known_intents=known_intents,
    )
