"""SQLModel tables. Raw messages are the ground truth; everything else hangs off a user id.

One module per feature; everything is importable from ``storage.models``.
"""

from storage.models._types import MAX_ROW_ID, UTCDateTime, utcnow
from storage.models.core import (
    ChannelIdentity,
    Conversation,
    Delivery,
    Fact,
    Message,
    PairingRequest,
    PendingAnswer,
    Task,
    User,
)
from storage.models.device import AudioSegment, Device, DeviceSession
from storage.models.files import StoredFile, StoredFileChunk
from storage.models.inbox import InboxItem
from storage.models.jobs import (
    CalendarEvent,
    CalendarSource,
    JobLease,
    JobState,
    Proposal,
    Reminder,
)
from storage.models.journal import JournalEntry, JournalSettings, JournalSummary
from storage.models.location import LocationPoint, LocationSetting, Place, Stay
from storage.models.memory import Episode, MemoryCursor, MemoryItem
from storage.models.ops import JobRun, LifebotProcess, ProcessLog
from storage.models.people import Contact
from storage.models.senses import DocumentChunk, IngestJob, UsageCount
from storage.models.web import ApiToken, IcsToken, ServerKey, WebLoginLink, WebSession

__all__ = [
    "MAX_ROW_ID",
    "ApiToken",
    "AudioSegment",
    "CalendarEvent",
    "CalendarSource",
    "ChannelIdentity",
    "Contact",
    "Conversation",
    "Delivery",
    "Device",
    "DeviceSession",
    "DocumentChunk",
    "Episode",
    "Fact",
    "IcsToken",
    "InboxItem",
    "IngestJob",
    "JobLease",
    "JobRun",
    "JobState",
    "JournalEntry",
    "JournalSettings",
    "JournalSummary",
    "LifebotProcess",
    "LocationPoint",
    "LocationSetting",
    "MemoryCursor",
    "MemoryItem",
    "Message",
    "PairingRequest",
    "PendingAnswer",
    "Place",
    "ProcessLog",
    "Proposal",
    "Reminder",
    "ServerKey",
    "Stay",
    "StoredFile",
    "StoredFileChunk",
    "Task",
    "UTCDateTime",
    "UsageCount",
    "User",
    "WebLoginLink",
    "WebSession",
    "utcnow",
]
