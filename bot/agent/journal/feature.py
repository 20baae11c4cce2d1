"""The journal's declaration: entries, their scores and summaries, charts and reviews."""

from __future__ import annotations

from bot.feature import Access, Feature, IntentWords, NotReference, Reference, Route

FEATURE = Feature(
    name="journal",
    about="Journal entries with mood, stress and energy scores over time, charts and reviews.",
    tables=("journalentry", "journalsettings", "journalsummary"),
    references=(
        Reference("journalentry", "message_id", target="message"),
        # Where an entry came from: ``message:<id>`` for a message without a channel id.
        Reference("journalentry", "ref", template="message:{message}"),
    ),
    not_references=(
        NotReference("journalentry", "themes", "words"),
        NotReference("journalentry", "people", "names"),
    ),
    intents=(
        IntentWords(
            "journal",
            r"\b(mood|stress|stressed|happiness|energy|lately|journal|chart|graph|"
            r"feeling|action items|in review)\b",
        ),
    ),
    tools=("get_time_series", "get_current_state", "get_month_summary", "get_year_summary"),
    commands=("journal", "chart"),
    jobs=("journal.review",),
    routes=(
        Route("/journal", Access.SESSION),
        Route("/api/v1/journal", Access.BEARER),
    ),
)
