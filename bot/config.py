"""Settings: the only place that reads the environment (and ``.env``).

Third-party credentials use their conventional names (``OPENAI_API_KEY``, ``TELEGRAM_BOT_TOKEN``,
...); lifebot's own settings are ``LIFEBOT_*``. Validation happens once at start-up and every
problem is reported with the setting's name and the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.clock import is_zone_name
from bot.errors import ConfigError

_TELEGRAM_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]{20,}$")


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class Settings(BaseSettings):
    """Every setting lifebot reads, with its environment variable name."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    # --- storage -------------------------------------------------------------------------
    data_dir: Path = Field(Path("./data"), validation_alias=_env("LIFEBOT_DATA_DIR"))
    database_url_setting: str | None = Field(None, validation_alias=_env("LIFEBOT_DATABASE_URL"))

    # --- LLM -----------------------------------------------------------------------------
    openai_api_key: str | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=_env("OPENAI_BASE_URL"))
    llm_model: str = Field("gpt-4o-mini", validation_alias=_env("LIFEBOT_LLM_MODEL"))
    llm_fast_model: str = Field("gpt-4o-mini", validation_alias=_env("LIFEBOT_LLM_FAST_MODEL"))
    """Routing, extraction and titles. Unset, it is the smart model (LIFEBOT_LLM_MODEL): a
    local server that serves one model needs one setting, not two."""
    llm_timeout: float = Field(30.0, gt=0, validation_alias=_env("LIFEBOT_LLM_TIMEOUT"))
    llm_max_retries: int = Field(3, ge=0, validation_alias=_env("LIFEBOT_LLM_MAX_RETRIES"))

    vision: bool = Field(default=False, validation_alias=_env("LIFEBOT_VISION"))
    """The smart model accepts images (OpenAI ``image_url`` parts): photos get described."""
    image_max_bytes: int = Field(
        10_000_000, ge=1000, validation_alias=_env("LIFEBOT_IMAGE_MAX_BYTES")
    )
    """The largest photo or image file kept (bigger ones are refused in plain words)."""

    # --- web search (off unless a backend is configured) -------------------------------------
    web_search_backend: Literal["off", "searxng", "brave"] = Field(
        "off", validation_alias=_env("LIFEBOT_WEB_SEARCH")
    )
    """``searxng`` (self-hosted, no key), ``brave`` (Brave Search API key) or ``off``."""
    searxng_url: str | None = Field(None, validation_alias=_env("LIFEBOT_SEARXNG_URL"))
    """Base URL of a SearXNG instance with the JSON format enabled."""
    brave_api_key: str | None = Field(None, validation_alias=_env("BRAVE_API_KEY"))
    brave_api_url: str = Field(
        "https://api.search.brave.com/res/v1", validation_alias=_env("LIFEBOT_BRAVE_API_URL")
    )
    web_search_daily_cap: int = Field(
        30, ge=0, validation_alias=_env("LIFEBOT_WEB_SEARCH_DAILY_CAP")
    )
    """Web searches one person may cause per day (UTC)."""

    # --- transcript ingest -----------------------------------------------------------------
    ingest_debounce_seconds: float = Field(
        30.0, ge=0, validation_alias=_env("LIFEBOT_INGEST_DEBOUNCE_SECONDS")
    )
    """A posted transcript waits this long; a newer one for the same meeting replaces it."""
    ingest_retry_seconds: float = Field(
        60.0, gt=0, validation_alias=_env("LIFEBOT_INGEST_RETRY_SECONDS")
    )

    # --- agent budgets ---------------------------------------------------------------------
    max_tool_rounds: int = Field(8, ge=1, validation_alias=_env("LIFEBOT_MAX_TOOL_ROUNDS"))
    max_tool_calls: int = Field(25, ge=1, validation_alias=_env("LIFEBOT_MAX_TOOL_CALLS"))
    turn_timeout: float = Field(60.0, gt=0, validation_alias=_env("LIFEBOT_TURN_TIMEOUT"))
    context_tokens: int = Field(12000, ge=1000, validation_alias=_env("LIFEBOT_CONTEXT_TOKENS"))
    history_messages: int = Field(20, ge=0, validation_alias=_env("LIFEBOT_HISTORY_MESSAGES"))
    tool_result_tokens: int = Field(
        1500, ge=100, validation_alias=_env("LIFEBOT_TOOL_RESULT_TOKENS")
    )
    tools_by_intent: bool = Field(True, validation_alias=_env("LIFEBOT_TOOLS_BY_INTENT"))
    """Offer only the tools the message's intent needs, widening within a turn when stuck
    (false: offer every tool on every turn)."""
    verify_answers: bool = Field(True, validation_alias=_env("LIFEBOT_VERIFY_ANSWERS"))
    """Check before answering: claims about the user's life must rest on this turn's tool
    results; an answer that fails is repaired in one more round or says what is not known."""
    verify_with_model: bool = Field(False, validation_alias=_env("LIFEBOT_VERIFY_WITH_MODEL"))
    """Also ask the fast model whether an answer the rules passed is grounded (one more
    cheap call per tool-using answer)."""
    threads_with_model: bool = Field(False, validation_alias=_env("LIFEBOT_THREADS_WITH_MODEL"))
    """Name threads and summarise their older turns with the fast model (false: the first
    words of the thread make its title, and older turns are kept as a plain extract)."""
    ask_timeout_minutes: int = Field(
        120, ge=1, validation_alias=_env("LIFEBOT_ASK_TIMEOUT_MINUTES")
    )
    """How long a question lifebot asked back waits for its answer; a later press of its
    buttons says what was not done."""
    persona_file: Path | None = Field(None, validation_alias=_env("LIFEBOT_PERSONA_FILE"))

    # --- identity --------------------------------------------------------------------------
    allowlist: str = Field("", validation_alias=_env("LIFEBOT_ALLOWLIST"))
    default_timezone: str = Field("UTC", validation_alias=_env("LIFEBOT_TIMEZONE"))

    # --- Telegram --------------------------------------------------------------------------
    telegram_bot_token: str | None = Field(None, validation_alias=_env("TELEGRAM_BOT_TOKEN"))
    telegram_api_url: str = Field(
        "https://api.telegram.org/bot", validation_alias=_env("LIFEBOT_TELEGRAM_API_URL")
    )
    telegram_webhook_url: str | None = Field(
        None, validation_alias=_env("LIFEBOT_TELEGRAM_WEBHOOK_URL")
    )
    telegram_webhook_secret: str | None = Field(
        None, validation_alias=_env("LIFEBOT_TELEGRAM_WEBHOOK_SECRET")
    )
    telegram_webhook_listen: str = Field(
        "127.0.0.1", validation_alias=_env("LIFEBOT_TELEGRAM_WEBHOOK_LISTEN")
    )
    telegram_webhook_port: int = Field(8443, validation_alias=_env("LIFEBOT_TELEGRAM_WEBHOOK_PORT"))
    telegram_allow_groups: bool = Field(
        default=False, validation_alias=_env("LIFEBOT_TELEGRAM_ALLOW_GROUPS")
    )
    telegram_max_voice_bytes: int = Field(
        20_000_000, validation_alias=_env("LIFEBOT_TELEGRAM_MAX_VOICE_BYTES")
    )
    telegram_file_url: str | None = Field(None, validation_alias=_env("LIFEBOT_TELEGRAM_FILE_URL"))
    """File download base URL; derived from LIFEBOT_TELEGRAM_API_URL (``.../file/bot``)."""
    telegram_poll_timeout: float = Field(
        10.0, ge=0, le=50, validation_alias=_env("LIFEBOT_TELEGRAM_POLL_TIMEOUT")
    )
    """Seconds one long poll (getUpdates) may wait for news."""
    telegram_edit_interval: float = Field(
        1.2, ge=0.5, validation_alias=_env("LIFEBOT_TELEGRAM_EDIT_INTERVAL")
    )
    """Seconds between edits of a streaming answer (Telegram allows ~1 per second per chat)."""
    telegram_retries: int = Field(3, ge=0, validation_alias=_env("LIFEBOT_TELEGRAM_RETRIES"))
    """Retries of one Bot API call after a network error or a 429."""
    telegram_album_quiet: float = Field(
        1.0, gt=0, validation_alias=_env("LIFEBOT_TELEGRAM_ALBUM_QUIET")
    )
    """Seconds without a new photo after which an album (photos sent together) is complete."""
    telegram_album_recover_every: float = Field(
        5.0, gt=0, validation_alias=_env("LIFEBOT_TELEGRAM_ALBUM_RECOVER_EVERY")
    )
    """Seconds between two looks for album photos a stopped process left unhandled."""

    # --- Slack -----------------------------------------------------------------------------
    slack_bot_token: str | None = Field(None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_app_token: str | None = Field(None, validation_alias=_env("SLACK_APP_TOKEN"))
    slack_signing_secret: str | None = Field(None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_mode: Literal["socket", "http"] = Field(
        "socket", validation_alias=_env("LIFEBOT_SLACK_MODE")
    )
    slack_http_host: str = Field("127.0.0.1", validation_alias=_env("LIFEBOT_SLACK_HTTP_HOST"))
    slack_http_port: int = Field(3000, validation_alias=_env("LIFEBOT_SLACK_HTTP_PORT"))
    slack_http_path: str = Field("/slack/events", validation_alias=_env("LIFEBOT_SLACK_HTTP_PATH"))
    slack_api_url: str = Field(
        "https://slack.com/api/", validation_alias=_env("LIFEBOT_SLACK_API_URL")
    )
    slack_stream_interval: float = Field(
        1.5, ge=0.5, validation_alias=_env("LIFEBOT_SLACK_STREAM_INTERVAL")
    )
    """Seconds between updates of a streaming answer (chat.update is ~50 calls/min)."""
    slack_max_audio_bytes: int = Field(
        25_000_000, ge=1, validation_alias=_env("LIFEBOT_SLACK_MAX_AUDIO_BYTES")
    )
    slack_drain_seconds: float = Field(
        10.0, ge=0, validation_alias=_env("LIFEBOT_SLACK_DRAIN_SECONDS")
    )
    """On shutdown, how long answers already under way may finish before they are cancelled."""

    # --- pendant / speech -------------------------------------------------------------------
    device_enabled: bool = Field(default=False, validation_alias=_env("LIFEBOT_DEVICE_ENABLED"))
    device_host: str = Field("127.0.0.1", validation_alias=_env("LIFEBOT_DEVICE_HOST"))
    device_port: int = Field(8765, validation_alias=_env("LIFEBOT_DEVICE_PORT"))
    stt_model: str = Field("tiny.en", validation_alias=_env("LIFEBOT_STT_MODEL"))
    stt_device: str = Field("cpu", validation_alias=_env("LIFEBOT_STT_DEVICE"))
    stt_compute_type: str = Field("int8", validation_alias=_env("LIFEBOT_STT_COMPUTE_TYPE"))
    stt_threads: int = Field(0, ge=0, validation_alias=_env("LIFEBOT_STT_THREADS"))
    """CPU threads per transcription; 0 means one per CPU core."""
    stt_workers: int = Field(1, ge=1, validation_alias=_env("LIFEBOT_STT_WORKERS"))
    """Transcriptions that may run at the same time (each holds its own model workspace)."""
    stt_beam_size: int = Field(1, ge=1, le=10, validation_alias=_env("LIFEBOT_STT_BEAM_SIZE"))
    stt_pack: bool = Field(default=False, validation_alias=_env("LIFEBOT_STT_PACK"))
    """Transcribe up to three short utterances that wait at the same time together in one
    30 s model window: cheaper per utterance on prepared clips, but on live pendant streams
    ``bench device`` kept fewer streams in real time with it (6 against 12), so off."""
    omi_idle_seconds: float = Field(20.0, gt=0, validation_alias=_env("LIFEBOT_OMI_IDLE_SECONDS"))
    """Omi: an utterance still open when chunks stop for this long is transcribed (it never
    ends in silence: Omi drops the last seconds when the phone disconnects). Keep it above the
    app's "Every x seconds" + 1."""
    # --- Home Assistant (Wyoming) and speech output ------------------------------------------
    wyoming_enabled: bool = Field(default=False, validation_alias=_env("LIFEBOT_WYOMING_ENABLED"))
    """Serve speech to text, lifebot's answers and speech output to Home Assistant."""
    wyoming_host: str = Field("127.0.0.1", validation_alias=_env("LIFEBOT_WYOMING_HOST"))
    """Wyoming has no authentication: anyone who can reach this address may use it."""
    wyoming_port: int = Field(10800, ge=0, le=65535, validation_alias=_env("LIFEBOT_WYOMING_PORT"))
    wyoming_user: str = Field("", validation_alias=_env("LIFEBOT_WYOMING_USER"))
    """The lifebot user (id or name) whose questions Home Assistant asks."""
    wyoming_satellites: str = Field("", validation_alias=_env("LIFEBOT_WYOMING_SATELLITES"))
    """Other users per satellite: ``satellite_id=user,...`` (the rest go to the user above)."""
    wyoming_trusted: bool = Field(default=False, validation_alias=_env("LIFEBOT_WYOMING_TRUSTED"))
    """Off: answers through Home Assistant never change anything (anyone may speak nearby)."""
    wyoming_zeroconf: bool = Field(default=True, validation_alias=_env("LIFEBOT_WYOMING_ZEROCONF"))
    """Announce the service over zeroconf (``_wyoming._tcp``) when it listens beyond loopback."""
    tts_engine: Literal["off", "espeak-ng"] = Field(
        "off", validation_alias=_env("LIFEBOT_TTS_ENGINE")
    )
    """Speech output: ``espeak-ng`` (local, offline; apt install espeak-ng) or ``off``."""
    tts_voice: str = Field("en-us", validation_alias=_env("LIFEBOT_TTS_VOICE"))
    """An espeak-ng voice name (``espeak-ng --voices`` lists them)."""

    device_max_frame_bytes: int = Field(
        65536, ge=1024, validation_alias=_env("LIFEBOT_DEVICE_MAX_FRAME_BYTES")
    )
    device_max_session_seconds: float = Field(
        3600.0, gt=0, validation_alias=_env("LIFEBOT_DEVICE_MAX_SESSION_SECONDS")
    )
    """Audio per session; a longer stream rolls over into a new session (new ``ready``)."""
    device_idle_timeout: float = Field(
        90.0, gt=0, validation_alias=_env("LIFEBOT_DEVICE_IDLE_TIMEOUT")
    )
    device_auth_timeout: float = Field(
        2.0, gt=0, validation_alias=_env("LIFEBOT_DEVICE_AUTH_TIMEOUT")
    )
    device_resume_seconds: float = Field(
        300.0, ge=0, validation_alias=_env("LIFEBOT_DEVICE_RESUME_SECONDS")
    )
    """A device that reconnects within this many seconds continues its last session."""
    device_vad_silence_ms: int = Field(
        600, ge=100, validation_alias=_env("LIFEBOT_DEVICE_VAD_SILENCE_MS")
    )
    """Silence that ends an utterance."""
    device_partials: bool = Field(default=True, validation_alias=_env("LIFEBOT_DEVICE_PARTIALS"))
    """Send the device partial transcripts while the user speaks (about one a second, only
    while the speech model has nothing else to do)."""
    device_early_final: bool = Field(
        default=True, validation_alias=_env("LIFEBOT_DEVICE_EARLY_FINAL")
    )
    """Start transcribing an utterance during the silence that ends it (when the model is
    idle), so the final transcript comes sooner after the user stops speaking."""
    device_max_utterance_seconds: float = Field(
        30.0, gt=1, validation_alias=_env("LIFEBOT_DEVICE_MAX_UTTERANCE_SECONDS")
    )
    device_spool_max_mb: float = Field(
        2000.0, ge=0, validation_alias=_env("LIFEBOT_DEVICE_SPOOL_MAX_MB")
    )
    """Disk cap of the audio spool (0: none). Transcribed audio is deleted first, oldest
    first; audio not yet transcribed never is (new audio is refused instead). Warns at 80%."""
    device_keep_audio: bool = Field(
        default=False, validation_alias=_env("LIFEBOT_DEVICE_KEEP_AUDIO")
    )
    """Keep spooled audio after it is transcribed (off: deleted once a session is done)."""
    device_wake_phrase: str = Field(
        "hey lifebot", validation_alias=_env("LIFEBOT_DEVICE_WAKE_PHRASE")
    )

    # --- memory -----------------------------------------------------------------------------
    embeddings_model: str | None = Field(None, validation_alias=_env("LIFEBOT_EMBEDDINGS_MODEL"))
    extraction_quiet_minutes: float = Field(
        10.0, gt=0, validation_alias=_env("LIFEBOT_EXTRACTION_QUIET_MINUTES")
    )
    extraction_every_messages: int = Field(
        20, ge=1, validation_alias=_env("LIFEBOT_EXTRACTION_EVERY_MESSAGES")
    )

    malloc_arenas: int = Field(2, ge=0, validation_alias=_env("LIFEBOT_MALLOC_ARENAS"))
    """glibc malloc arenas for ``serve`` (0: glibc's default of eight per core); fewer arenas
    keep resident memory down with the speech and embedding models' threads."""

    # --- jobs ------------------------------------------------------------------------------
    jobs_enabled: bool = Field(default=True, validation_alias=_env("LIFEBOT_JOBS_ENABLED"))
    jobs_heartbeat: float = Field(2.0, gt=0, validation_alias=_env("LIFEBOT_JOBS_HEARTBEAT"))
    """Seconds between leader-lease renewals (and a standby's checks); also each process's
    heartbeat for the owner's page (its row and its newest log lines)."""
    jobs_lease_seconds: float = Field(
        8.0, gt=0, validation_alias=_env("LIFEBOT_JOBS_LEASE_SECONDS")
    )
    """Leader lease length: a standby takes over within a lease plus a heartbeat of the
    leader's last renewal (frozen or dead)."""
    jobs_send_rate: float = Field(30.0, ge=0, validation_alias=_env("LIFEBOT_JOBS_SEND_RATE"))
    """Pushes per second per channel (0: unpaced; 429s are honoured either way)."""
    push_away_reminder_seconds: float = Field(
        120.0, ge=0, validation_alias=_env("LIFEBOT_PUSH_AWAY_REMINDER_SECONDS")
    )
    """How long a reminder waits for an away pendant (not connected) before it goes to the
    user's next linked channel (0: at once)."""
    push_away_briefing_seconds: float = Field(
        1800.0, ge=0, validation_alias=_env("LIFEBOT_PUSH_AWAY_BRIEFING_SECONDS")
    )
    """The same wait for a morning briefing or a proposed event (less urgent than a reminder)."""
    push_away_seconds: float = Field(
        600.0, ge=0, validation_alias=_env("LIFEBOT_PUSH_AWAY_SECONDS")
    )
    """The same wait for any other push (notices, weekly reviews, answers to questions)."""
    briefing_late_hours: float = Field(
        3.0, ge=0, validation_alias=_env("LIFEBOT_BRIEFING_LATE_HOURS")
    )
    """After downtime, a briefing later than this is skipped (and recorded as skipped)."""
    proposal_ttl_days: float = Field(7.0, gt=0, validation_alias=_env("LIFEBOT_PROPOSAL_TTL_DAYS"))

    # --- the user's own calendars (issue 16) ------------------------------------------------
    calendar_refresh_minutes: float = Field(
        30.0, gt=0, validation_alias=_env("LIFEBOT_CALENDAR_REFRESH_MINUTES")
    )
    """How often the leader re-reads subscribed ICS feeds and CalDAV calendars."""
    calendar_days_ahead: int = Field(
        365, ge=1, le=3660, validation_alias=_env("LIFEBOT_CALENDAR_DAYS_AHEAD")
    )
    """Recurring events are expanded this many days ahead (and 30 days back)."""
    calendar_read_seconds: float = Field(
        10.0, gt=0, le=600, validation_alias=_env("LIFEBOT_CALENDAR_READ_SECONDS")
    )
    """A subscribed calendar's fetch (every redirect, every byte) must end within this many
    seconds, and so must reading it (a crafted repeat rule can take a parser forever)."""
    calendar_allow_private: bool = Field(
        default=False, validation_alias=_env("LIFEBOT_CALENDAR_ALLOW_PRIVATE")
    )
    """Allow calendar addresses on this machine or the local network (a home CalDAV server);
    off, so a chat user cannot make lifebot fetch from inside your network."""
    calendar_key: str | None = Field(None, validation_alias=_env("LIFEBOT_CALENDAR_KEY"))
    """Fernet key that encrypts CalDAV passwords at rest (make one with
    ``lifebot calendar key``); without it CalDAV accounts cannot be added."""

    # --- web page and REST API ----------------------------------------------------------------
    web_enabled: bool = Field(default=True, validation_alias=_env("LIFEBOT_WEB_ENABLED"))
    web_host: str = Field("127.0.0.1", validation_alias=_env("LIFEBOT_WEB_HOST"))
    web_port: int = Field(8700, ge=0, le=65535, validation_alias=_env("LIFEBOT_WEB_PORT"))
    web_public_url: str | None = Field(None, validation_alias=_env("LIFEBOT_WEB_PUBLIC_URL"))
    """The address people open (behind a reverse proxy: its https:// URL); sign-in links use it."""
    web_secret: str | None = Field(None, validation_alias=_env("LIFEBOT_WEB_SECRET"))
    """Signs session cookies; unset: a random one is kept in the database (shared by every
    process on it)."""
    web_session_days: float = Field(30.0, gt=0, validation_alias=_env("LIFEBOT_WEB_SESSION_DAYS"))

    # --- the Model Context Protocol (issue 32) -------------------------------------------------
    mcp_http: bool = Field(default=True, validation_alias=_env("LIFEBOT_MCP_HTTP"))
    """Serve lifebot as an MCP server at ``/mcp`` on the web port (personal API tokens only)."""
    mcp_token: str | None = Field(None, validation_alias=_env("LIFEBOT_MCP_TOKEN"))
    """A personal API token for ``lifebot mcp serve`` (instead of ``--token``: not in ``ps``)."""
    mcp_servers_file: Path | None = Field(None, validation_alias=_env("LIFEBOT_MCP_SERVERS"))
    """A TOML or JSON file naming the MCP servers whose tools lifebot may use (README)."""
    mcp_call_timeout: float = Field(
        20.0, gt=0, le=300, validation_alias=_env("LIFEBOT_MCP_CALL_TIMEOUT")
    )
    """Seconds one call to an MCP server may take (a server may set its own ``timeout``);
    past it the turn goes on without that result."""

    # --- location (issue 24) -------------------------------------------------------------------
    location_retention_days: float = Field(
        90.0, gt=0, validation_alias=_env("LIFEBOT_LOCATION_RETENTION_DAYS")
    )
    """Raw location points older than this are deleted; stays are kept."""

    # --- logging ---------------------------------------------------------------------------
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", validation_alias=_env("LIFEBOT_LOG_LEVEL")
    )
    """DEBUG also shows every HTTP request of the model, Telegram and Slack clients."""
    log_format: Literal["text", "json"] = Field("text", validation_alias=_env("LIFEBOT_LOG_FORMAT"))
    """``json``: one JSON object per line with channel, user, conversation and turn ids."""
    log_file: Path | None = Field(None, validation_alias=_env("LIFEBOT_LOG_FILE"))
    """Where logs go; default stderr, or ``<data dir>/lifebot.log`` while the console chats."""

    @model_validator(mode="after")
    def _fast_model_follows_the_smart_one(self) -> Settings:
        if "llm_fast_model" not in self.model_fields_set and "llm_model" in self.model_fields_set:
            self.llm_fast_model = self.llm_model
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower_format(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @property
    def database_url(self) -> str:
        """The async SQLAlchemy URL: the configured one, or a SQLite file in the data dir."""
        url = self.database_url_setting or f"sqlite:///{self.data_dir / 'lifebot.db'}"
        return normalise_database_url(url)

    @property
    def web_url(self) -> str:
        """Where the web page is reached: LIFEBOT_WEB_PUBLIC_URL, else the local address."""
        if self.web_public_url:
            return self.web_public_url.rstrip("/")
        return f"http://{self.web_host}:{self.web_port}"

    @property
    def llm_configured(self) -> bool:
        """True when an LLM endpoint or key is set (Ollama and vLLM need only the URL)."""
        return bool(self.openai_api_key or self.openai_base_url)

    @property
    def telegram_enabled(self) -> bool:
        """True when a Telegram bot token is set."""
        return bool(self.telegram_bot_token)

    @property
    def slack_enabled(self) -> bool:
        """True when a Slack bot token is set."""
        return bool(self.slack_bot_token)

    @property
    def persona_path(self) -> Path:
        """The persona file the user can edit (``SOUL.md`` in the data dir by default)."""
        return self.persona_file or self.data_dir / "SOUL.md"

    def allowlisted(self) -> set[str]:
        """``channel:sender_id`` entries let in without pairing."""
        return {item.strip() for item in self.allowlist.split(",") if item.strip()}

    def problems(self) -> list[str]:
        """Every configuration problem, each naming the setting and the fix."""
        out: list[str] = []
        tok = self.telegram_bot_token
        if tok is not None and not _TELEGRAM_TOKEN.match(tok):
            out.append(
                "TELEGRAM_BOT_TOKEN looks wrong: it should be like 123456:ABC-DEF...; "
                "copy it from @BotFather's /token answer."
            )
        if self.slack_bot_token is not None and not self.slack_bot_token.startswith("xoxb-"):
            out.append(
                "SLACK_BOT_TOKEN must start with xoxb-: copy the Bot User OAuth Token from "
                "your Slack app's OAuth & Permissions page."
            )
        if self.web_search_backend == "searxng" and not self.searxng_url:
            out.append(
                "LIFEBOT_WEB_SEARCH=searxng needs LIFEBOT_SEARXNG_URL (your SearXNG instance, "
                "with the json format enabled in its settings.yml)."
            )
        if self.web_search_backend == "brave" and not self.brave_api_key:
            out.append(
                "LIFEBOT_WEB_SEARCH=brave needs BRAVE_API_KEY (api-dashboard.search.brave.com)."
            )
        if self.slack_enabled and self.slack_mode == "socket":
            app = self.slack_app_token
            if not app:
                out.append(
                    "SLACK_APP_TOKEN is missing: Socket Mode needs an app-level token "
                    "(xapp-...) with connections:write, or set LIFEBOT_SLACK_MODE=http."
                )
            elif not app.startswith("xapp-"):
                out.append(
                    "SLACK_APP_TOKEN must start with xapp-: create an app-level token with "
                    "connections:write."
                )
        if self.slack_enabled and self.slack_mode == "http" and not self.slack_signing_secret:
            out.append(
                "SLACK_SIGNING_SECRET is missing: HTTP mode verifies every request with it; "
                "copy it from your Slack app's Basic Information page."
            )
        if self.telegram_webhook_url and not self.telegram_webhook_url.startswith("https://"):
            out.append("LIFEBOT_TELEGRAM_WEBHOOK_URL must be an https:// URL Telegram can reach.")
        secret = self.telegram_webhook_secret
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
            out.append(
                "LIFEBOT_TELEGRAM_WEBHOOK_SECRET may only use A-Z, a-z, 0-9, _ and - (1 to 256 "
                "characters); leave it unset and every process derives the same one from the "
                "bot token."
            )
        if not is_zone_name(self.default_timezone):
            out.append(
                f"LIFEBOT_TIMEZONE={self.default_timezone!r} is not an IANA time zone: use a "
                "name like Europe/Lisbon or America/New_York."
            )
        url = self.database_url
        if not url.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            out.append(
                "LIFEBOT_DATABASE_URL must be a sqlite:/// or postgresql:// URL "
                f"(got {url.split('://')[0]}://...)."
            )
        return out


def normalise_database_url(url: str) -> str:
    """Map plain ``sqlite://`` / ``postgresql://`` URLs to their async drivers."""
    for plain, driver in (
        ("sqlite://", "sqlite+aiosqlite://"),
        ("postgresql://", "postgresql+asyncpg://"),
        ("postgres://", "postgresql+asyncpg://"),
        ("postgresql+psycopg://", "postgresql+asyncpg://"),
    ):
        if url.startswith(plain):
            return driver + url[len(plain) :]
    return url


def environment(names: Iterable[str], env_file: Path | None = Path(".env")) -> dict[str, str]:
    """The values of the named environment variables (else ``.env`` lines), where set.

    For secrets a configuration file refers to by name (an MCP server's headers): the file
    holds the variable's name, never its value.
    """
    wanted = [n for n in dict.fromkeys(names) if n]
    found = {n: os.environ[n] for n in wanted if n in os.environ}
    missing = [n for n in wanted if n not in found]
    if missing and env_file is not None and env_file.is_file():
        from dotenv import dotenv_values  # noqa: PLC0415  (pydantic-settings' own .env reader)

        from_file = dotenv_values(env_file)
        found.update({n: v for n in missing if (v := from_file.get(n)) is not None})
    return found


def load_settings(**overrides: object) -> Settings:
    """Read and validate settings; raise ConfigError with plain-words problems."""
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]  # overrides are by field name
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            problems.append(f"{name}: {err['msg']}")
        raise ConfigError(problems) from exc
    problems = settings.problems()
    if problems:
        raise ConfigError(problems)
    return settings
