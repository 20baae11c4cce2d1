"""The journal's declaration: entries, their scores and summaries, charts and reviews."""

from __future__ import annotations

from bot.feature import Access, Feature, IntentWords, Route

FEATURE = Feature(
    name="journal",
    about="Journal entries with mood, stress and energy scores over time, charts and reviews.",
    tables=("journalentry", "journalsettings", "journalsummary"),
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
