"""Declarations of the features that speak first (issue 28).

Reminders, briefings, proposed events, the user's own calendars and meeting transcripts.
"""

from __future__ import annotations

from bot.feature import Access, Feature, IntentWords, NotReference, Reference, Route, Secret
from storage.repos.calendar_sources import settle_twin_sources

REMINDERS = Feature(
    name="reminders",
    about="Reminders, once or repeating, pushed at the right local time through the outbox.",
    tables=("reminder",),
    references=(
        Reference("delivery", "key", template="reminder:{user}:{reminder}:"),
        Reference("delivery", "payload", target="reminder", path=("reminder_id",)),
    ),
    not_references=(
        NotReference("reminder", "recurrence", "a schedule"),
        NotReference("reminder", "people", "names"),
    ),
    intents=(IntentWords("reminders", r"\b(remind(ers?)?|alarm)\b"),),
    tools=("set_reminder", "list_reminders", "cancel_reminder"),
    commands=("remind", "reminders"),
    jobs=("reminders.fire",),
    routes=(Route("/api/v1/reminders", Access.BEARER), Route("/reminders", Access.SESSION)),
)
"""Reminders' declaration."""

BRIEFINGS = Feature(
    name="briefings",
    about="A morning briefing in each person's own time zone: the day's events, reminders, news.",
    commands=("briefing",),
    references=(
        Reference("delivery", "key", template="briefing:{user}:"),
        Reference("delivery", "key", template="journal-review:{user}:"),
    ),
    jobs=("briefings.plan",),
    routes=(Route("/briefing", Access.SESSION),),
)
"""Briefings' declaration (their settings are columns of the user)."""

PROPOSALS = Feature(
    name="proposals",
    about="Events lifebot noticed in chats, transcripts and stays, proposed for a yes or no.",
    tables=("proposal",),
    references=(
        Reference("proposal", "source_message_id", target="message"),
        Reference("proposal", "event_id", target="calendarevent"),
        Reference("delivery", "key", template="proposal:{user}:{proposal}"),
        Reference("delivery", "payload", target="proposal", path=("proposal_id",)),
        # The buttons of a proposal push: ``[label, command, row]``.
        Reference(
            "delivery", "payload", path=("buttons", "*", "1"), template="/proposal yes {proposal}"
        ),
        Reference(
            "delivery", "payload", path=("buttons", "*", "1"), template="/proposal no {proposal}"
        ),
        # A question back about a proposal completes one of these command lines.
        Reference("pendinganswer", "command", template="/place name {proposal}"),
        Reference("pendinganswer", "command", template="/proposal rename {proposal}"),
    ),
    not_references=(NotReference("proposal", "people", "names"),),
    commands=("proposal",),
    jobs=("proposals.scan", "proposals.expire"),
    routes=(Route("/api/v1/proposals", Access.BEARER), Route("/proposals", Access.SESSION)),
)
"""Proposed events' declaration."""

CALENDAR = Feature(
    name="calendar",
    about="Events: lifebot's own, imported ICS files, subscribed feeds and linked CalDAV "
    "calendars, and the private feed of them a person can subscribe to.",
    tables=("calendarevent", "calendarsource", "icstoken"),
    # One calendar per person, kind and address (migration 0024): an older export's copy
    # merges into the first, as the upgrade merges a database's.
    import_fixes=(settle_twin_sources,),
    references=(
        Reference("calendarevent", "source", template="ics:{calendarsource}"),
        Reference("calendarevent", "source", template="caldav:{calendarsource}"),
        # An outside occurrence's uid: owner and source in front (outside_uid).
        Reference("calendarevent", "uid", template="{user}/ics:{calendarsource}/"),
        Reference("calendarevent", "uid", template="{user}/caldav:{calendarsource}/"),
        Reference("calendarevent", "uid", template="{user}/"),
    ),
    not_references=(NotReference("calendarevent", "people", "names"),),
    secrets=(
        Secret("calendar password key", setting="calendar_key"),
        # Subscribed feeds carry their secret in the address (Google's private-…/basic.ics).
        Secret(
            "calendar feed address",
            shape=r"((?:webcals?|https?)://)\S+\.ics\b\S*",
            example="webcal://calendar.example.test/ical/me/private-7f3a9c2e41d0/basic.ics",
        ),
        Secret(
            "the private calendar feed",
            shape=r"(/calendar/)[A-Za-z0-9_\-]{16,}(?=\.ics)",
            example="subscribe to /calendar/Vf3kq9ZpL0wXyT7bNc2dRs8.ics on your phone",
        ),
    ),
    intents=(
        IntentWords(
            "calendar",
            r"\b(calendar|events?|meetings?|appointments?|schedule[ds]?|book(ed)?|agenda)\b",
        ),
    ),
    tools=("list_events", "add_event", "cancel_event"),
    commands=("calendar",),
    jobs=("calendars.refresh",),
    routes=(
        Route("/api/v1/events", Access.BEARER),
        Route("/api/v1/calendars", Access.BEARER),
        Route("/calendars", Access.SESSION),
        Route("/calendar", Access.SESSION),
        Route("/calendar/{secret}.ics", Access.PATH_TOKEN),
    ),
)
"""Calendars' declaration."""

MEETINGS = Feature(
    name="meetings",
    about="Meeting transcripts posted by other apps become memory, action items and events.",
    tables=("ingestjob",),
    references=(
        Reference("ingestjob", "episode_id", target="episode"),
        # A transcript's lines are deduplicated per user: the same meeting posted again adds none.
        Reference("message", "dedupe_key", template="meeting:{user}:"),
    ),
    not_references=(NotReference("ingestjob", "body", "the meeting as the other app posted it"),),
    routes=(Route("/api/v1/ingest", Access.BEARER, max_body=5_000_000),),
)
"""Meeting transcripts' declaration (the worker is a task of the web room)."""
