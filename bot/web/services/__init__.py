"""What the pages and the REST API do, once, one small service per room of the page.

Each service is scoped to one user: a method handed another user's id answers as if the
object did not exist (None or False), so callers turn that into 404 and nobody learns what
others have. ``WebService`` only groups them (and the collaborators pages read directly);
the web room's builder (``bot.web.room.build_web_core``) makes each once.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.accounts import Accounts
from bot.agent.contacts import Contacts
from bot.agent.conversations import Conversations
from bot.agent.memory.views import MemoryViews
from bot.clock import Clock
from bot.jobs.service import Jobs
from bot.web.services.calendar import WebCalendar
from bot.web.services.data import WebData
from bot.web.services.devices import WebDevices
from bot.web.services.facts import WebFacts
from bot.web.services.journal import WebJournal
from bot.web.services.memory import WebMemory
from bot.web.services.owner import WebOwner
from bot.web.services.pending import WebPending
from bot.web.services.reminders import WebReminders
from bot.web.services.settings import WebSettings
from storage.db import Database


@dataclass(frozen=True, slots=True)
class WebService:
    """The page's services by room, and the collaborators they share (no operations of its own)."""

    db: Database
    """Tool contexts of rooms that serve from the web's core (MCP)."""
    clock: Clock
    accounts: Accounts
    """Users, their channels and pairings (sign-in finds its user here)."""
    contacts: Contacts
    """The people each user keeps (the Contacts page and API)."""
    conversations: Conversations
    """Messages and conversations (the Chat page and uploads)."""
    memory_views: MemoryViews
    """Facts with their sources, episodes, days of messages (the Chat page's citations)."""
    jobs: Jobs
    """Reminders, calendars and the outbox (the Calendars page, MCP's upcoming)."""
    pending: WebPending
    """Questions and messages that wait in the chat (Today page, /retry)."""
    memory: WebMemory
    """Search, days, conversations and episodes."""
    facts: WebFacts
    """Facts and MEMORY.md."""
    reminders: WebReminders
    """Reminders and the briefing."""
    calendar: WebCalendar
    """Events and proposed events."""
    devices: WebDevices
    """Pendants."""
    settings: WebSettings
    """Settings and linked channels."""
    journal: WebJournal
    """Journal entries, series and charts."""
    data: WebData
    """Export and delete-my-data."""
    owner: WebOwner
    """The owner's pages."""


__all__ = [
    "WebCalendar",
    "WebData",
    "WebDevices",
    "WebFacts",
    "WebJournal",
    "WebMemory",
    "WebOwner",
    "WebPending",
    "WebReminders",
    "WebService",
    "WebSettings",
]
