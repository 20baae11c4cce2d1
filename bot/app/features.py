"""The registered features: the one list the shared machinery iterates (issue 28).

A new feature is its own package with a ``feature.py`` declaration plus one line here; the
contract tests (``tests/test_feature_contract.py``) then say what it still lacks.
"""

from __future__ import annotations

from bot.adapters.slack import feature as slack
from bot.adapters.telegram import feature as telegram
from bot.agent import documents, people, photos, websearch
from bot.agent.journal import feature as journal
from bot.agent.memory import feature as memory
from bot.agent.tools.base import ToolRegistry
from bot.config import Settings
from bot.device import feature as devices
from bot.dispatch import feature as conversations
from bot.feature import Registry
from bot.jobs import feature as jobs
from bot.location import feature as location
from bot.mcp import feature as mcp
from bot.web import feature as web
from bot.web.limits import RequestOptions
from storage.db import Database
from storage.files import FileStore

REGISTRY = Registry(
    (
        conversations.FEATURE,
        memory.FEATURE,
        journal.FEATURE,
        people.FEATURE,
        photos.FEATURE,
        documents.FEATURE,
        websearch.FEATURE,
        jobs.REMINDERS,
        jobs.BRIEFINGS,
        jobs.PROPOSALS,
        jobs.CALENDAR,
        jobs.MEETINGS,
        location.FEATURE,
        devices.PENDANT,
        devices.OMI,
        devices.WYOMING,
        telegram.FEATURE,
        slack.FEATURE,
        web.FEATURE,
        mcp.FEATURE,
    )
)
"""Every feature of this lifebot, in the order they are described to newcomers."""


def open_files(settings: Settings, db: Database) -> FileStore:
    """The file store of every registered kind (no I/O).

    Lasting kinds live in the database on PostgreSQL, else in the data folder's ``files``.
    """
    return FileStore.open(db, settings.data_dir, REGISTRY.file_kinds())


def route_by_intent(tools: ToolRegistry) -> ToolRegistry:
    """Give ``tools`` every registered feature's intent words (returns it for chaining)."""
    for intent in REGISTRY.intents():
        tools.add_intent(intent.group, intent.words)
    return tools


def request_options(settings: Settings) -> RequestOptions:
    """The request layer's limits: every declared route's, with the settings they name read."""
    names = {r.max_body_setting for r in REGISTRY.routes() if r.max_body_setting}
    return RequestOptions(
        registry=REGISTRY,
        setting_limits={name: int(getattr(settings, name)) for name in sorted(names)},
    )


def intent_words() -> dict[str, str]:
    """Every declared intent group and its words (what the agent routes by)."""
    return {intent.group: intent.words for intent in REGISTRY.intents()}
