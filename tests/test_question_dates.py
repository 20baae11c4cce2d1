"""Relative times anchored on a date the question names, not on today (issue 21)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from bot.agent.retrieval.timeparse import parse_time

NOW = datetime(2024, 3, 1, 12, tzinfo=UTC)
ZONE = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        (
            "What did Joanna finish last Friday on 23 January, 2022?",
            date(2022, 1, 21),
            date(2022, 1, 23),
        ),
        ("What happened the week before August 3, 2023?", date(2023, 7, 27), date(2023, 8, 3)),
        (
            "Which puppy did she get two weeks before August 11, 2023?",
            date(2023, 7, 28),
            date(2023, 8, 11),
        ),
        (
            "What was shown on the Sunday before October 25, 2022?",
            date(2022, 10, 18),
            date(2022, 10, 25),
        ),
        (
            "What was the issue last week, as mentioned on November 6, 2023?",
            date(2023, 10, 30),
            date(2023, 11, 6),
        ),
    ],
)
def test_a_relative_time_counts_from_the_date_the_question_names(
    question: str, first: date, last: date
) -> None:
    window = parse_time(question, NOW, ZONE).window
    assert window is not None
    assert window.start.astimezone(ZONE).date() == first
    # Half-open: the window ends at the start of the day after the named date.
    assert window.end.astimezone(ZONE).date() == date.fromordinal(last.toordinal() + 1)


def test_without_a_named_date_last_friday_is_still_counted_from_today() -> None:
    window = parse_time("What did I finish last Friday?", NOW, ZONE).window
    assert window is not None
    assert window.start.astimezone(ZONE).date() == date(2024, 2, 23)


def test_a_named_date_alone_is_that_day() -> None:
    window = parse_time("What did I do on 3 May 2023?", NOW, ZONE).window
    assert window is not None
    assert window.start.astimezone(ZONE).date() == date(2023, 5, 3)
    assert window.end.astimezone(ZONE).date() == date(2023, 5, 4)
