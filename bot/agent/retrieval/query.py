"""Query understanding: time window, recency, names and topic words of a question."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.agent.retrieval.timeparse import MONTHS, WEEKDAYS, TimeWindow, parse_time
from storage.search.analysis import stem
from storage.search.fulltext import STOPWORDS, fts_terms

RECENCY = re.compile(
    r"\b(latest|most recent|newest|lately|recently|last time|the last (?:thing|message|note|"
    r"entry|one)|my last \w+|(?:say|said|write|wrote|mention(?:ed)?|tell|told|note[sd]?)\b"
    r"[^?.!]{0,40}?\blast\b)",
    re.IGNORECASE,
)
_RECENCY_WORDS = frozenset(
    ["latest", "recent", "newest", "lately", "recently", "last", "time", "note", "notes"]
)
_NAME = re.compile(r"\b[A-Z][a-z]+(?:-[A-Z][a-z]+)?\b")
_NOT_NAMES = frozenset(
    {w.capitalize() for w in (*MONTHS, *WEEKDAYS)}
    | {w.capitalize() for w in STOPWORDS}
    | {"I", "Did", "Do", "Does", "Has", "Have", "Was", "Were", "Is", "Are", "Can", "Could",
       "Tell", "Show", "Find", "Remind", "Remember", "Please", "Today", "Yesterday",
       "Tomorrow", "Last", "This", "Next", "Lifebot", "Hey", "Hi", "Ok", "Okay", "Whose",
       "According", "Christmas", "Easter", "Halloween", "Thanksgiving", "Ramadan", "Diwali",
       "New", "Year", "Eve", "Mr", "Mrs", "Ms", "Dr", "Which", "Who", "Whom", "Where"}
)  # fmt: skip
_ALTERNATIVES = re.compile(
    r"\b(?:[A-Z][\w'-]*\s*,\s*)*[A-Z][\w'-]*,?\s+or\s+(?:the\s+)?[A-Z][\w'-]*"
)
"""Names offered as alternatives ("Biscuit or Pepper", "Ana, Rui or Ben"): candidates."""
_PLACE_BEFORE = re.compile(r"\b(?:the|in|at|near)\s+$", re.IGNORECASE)
"""A capitalised word after these is a place or a thing ("in Lisbon", "the Louvre")."""


QUESTION_WORDS = frozenset({
    "kind", "type", "sort", "likely", "probably", "would", "might", "many", "much", "ever",
    "usually", "often", "currently", "particular", "specific", "exactly",
})  # fmt: skip
"""Words that shape a question rather than name its topic ("what kind of ...")."""
_WHEN = re.compile(r"^\s*(?:when|how long ago|what (?:date|day|time|year|month))\b", re.IGNORECASE)
TIME_WORDS = [
    "yesterday", "today", "tonight", "tomorrow", "week", "weekend", "month", "year", "ago",
    "last", "next", "recently", "morning", "evening", "night",
    *WEEKDAYS, *(m for m in MONTHS if len(m) > 3),
]  # fmt: skip
"""Added, lightly weighted, to "when ..." questions: the answer is a turn that says when."""
TIME_WORD_WEIGHT = 0.2


def weighted_terms(text: str, terms: list[str]) -> list[tuple[str, float]]:
    """Stems to score a question with, and their weights.

    Topic words count fully; question-shaping words are dropped; a "when" question also
    looks, lightly, for the words people use to say when something happened.
    """
    out: dict[str, float] = {}
    for t in terms:
        if t not in QUESTION_WORDS:
            out.setdefault(stem(t), 1.0)
    if _WHEN.search(text):
        for t in TIME_WORDS:
            out.setdefault(stem(t), TIME_WORD_WEIGHT)
    return list(out.items())


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """How a question will be searched."""

    text: str
    terms: list[str]
    """Topic words for full text (time words and stop words removed)."""
    window: TimeWindow | None = None
    """A hard filter: nothing outside it is ever returned."""
    recency: bool = False
    """Answer newest first, not by similarity."""
    people: list[str] = field(default_factory=list)
    """Names that look like people the question is about (a filter where they are known)."""
    unresolved: str | None = None
    """Time words we could not pin down; the answer must say so rather than guess."""
    candidates: list[str] = field(default_factory=list)
    """Names offered as alternatives ("Biscuit or Pepper"): searched for, never a filter."""
    event: str = ""
    """The event an undatable time hangs on ("move" in "after the move"): its words stay
    in ``terms``, so the topic is searched with no time filter."""

    @property
    def weighted(self) -> list[tuple[str, float]]:
        """Stemmed topic words with weights (see ``weighted_terms``)."""
        return weighted_terms(self.text, self.terms)


def is_known(name: str, known: Collection[str]) -> bool:
    """``name`` is one of ``known`` (lower-cased), or its short form ("Mel" for Melanie)."""
    low = name.lower()
    return any(k == low or (len(low) >= 3 and k.startswith(low)) for k in known)


def understand(
    text: str,
    now: datetime,
    tz: ZoneInfo,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    people: list[str] | None = None,
    known_people: Collection[str] | None = None,
) -> QueryPlan:
    """Plan the search for ``text``; explicit ``start``/``end``/``people`` win over parsing.

    ``known_people`` (lower-cased names from the user's memory: contacts, speakers, facts),
    when given, decides which capitalised words are people; without it, a capitalised word
    that is not a question word, a month, a place after "in"/"the" or one of alternatives
    joined by "or" is taken for a person.
    """
    parsed = parse_time(text, now, tz)
    window = parsed.window
    unresolved = parsed.unresolved
    if start is not None or end is not None:
        lo = start or datetime(1970, 1, 1, tzinfo=UTC)
        hi = end or now
        window = TimeWindow(lo, hi, "the requested dates")
        unresolved = None
    recency = bool(RECENCY.search(parsed.rest))
    terms = fts_terms(parsed.rest)
    if recency:
        terms = [t for t in terms if t not in _RECENCY_WORDS]
    names, candidates = _names(text, known_people)
    chosen = list(people or [])
    chosen += [n for n in names if n not in chosen]
    return QueryPlan(text, terms, window, recency, chosen, unresolved, candidates, parsed.event)


def _names(text: str, known: Collection[str] | None) -> tuple[list[str], list[str]]:
    """(people, candidates) among the capitalised words of a question."""
    offered = {
        m.group(0) for span in _ALTERNATIVES.finditer(text) for m in _NAME.finditer(span.group(0))
    }
    people: list[str] = []
    candidates: list[str] = []
    for m in _NAME.finditer(text):
        word = m.group(0)
        if word in _NOT_NAMES or word in people or word in candidates:
            continue
        if word in offered:
            candidates.append(word)
        elif known is not None:
            if is_known(word, known):
                people.append(word)
        elif not _PLACE_BEFORE.search(text[: m.start()]) or text.startswith("'s", m.end()):
            people.append(word)
    return people, candidates


def without_speakers(text: str, names: Collection[str], speakers: Collection[str]) -> str | None:
    """``text`` with the names of people who speak in the memory left out, for its vector.

    A sentence vector of "What martial arts has John done?" leans towards the turns that
    say "John" (often the other person greeting him), not the ones where John tells what he
    does; who speaks is scored apart (the speaker bonus, the words). Only ``names`` that are
    ``speakers`` (lower-cased; short forms count) are left out: "Vivaldi" or "Paris" are the
    topic. None when no such name is asked about or no topic word would be left.
    """
    spoken = [n for n in names if is_known(n, speakers)]
    if not spoken:
        return None
    out = text
    for name in spoken:
        out = re.sub(rf"\b{re.escape(name)}(?:['\u2019]s)?\b", " ", out)
    out = re.sub(r"\s+", " ", out).strip()
    if out == text.strip() or not [t for t in fts_terms(out) if t not in QUESTION_WORDS]:
        return None
    return out
