"""Tools by intent: the message's intent and the router's confidence choose the visible tools.

Deterministic rules, no model call: each tool group (tasks, reminders, calendar, memory,
journal, location, time, web, ...) has a pattern of the words that ask for it, declared by
the feature that brings the group (``Feature.intents``) and kept by the tool registry. One
group matched is high confidence (that group only); two are medium (those groups plus the
resolution tools that pin down dates and references); none or many are low (every tool, as
before). A turn that makes no progress with what it was shown widens one step within the
same turn.

Fewer tools offered is fewer prompt tokens on every model call of the turn
(``python -m bench controller`` prints the figure).
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from bot.agent.questions import QuestionKind, question_kind
from bot.agent.tools.base import ToolRegistry


class Confidence(enum.IntEnum):
    """How sure the rules are about the groups; the value is how narrow the offer starts."""

    LOW = 0
    """Nothing (or too much) matched: every tool is offered."""
    MEDIUM = 1
    """Two groups matched: those groups plus the resolution tools."""
    HIGH = 2
    """Exactly one group matched: that group only."""


RESOLUTION_TOOLS = ("current_time", "list_facts", "search_memory")
"""Tools that pin down what a request refers to (dates, stored facts, who and where): added
to the routed groups at medium confidence."""


@dataclass(frozen=True, slots=True)
class Intent:
    """What a message asks for, as far as the rules can tell."""

    groups: frozenset[str]
    """The tool groups the message's words point at."""
    confidence: Confidence
    """How narrow the tool offer starts."""
    kind: QuestionKind = QuestionKind.FACT
    """The question's type (fact, summary, browse, compare, count)."""


def words_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching any of ``words`` as whole words, any case (None for no words).

    For intents the operator adds (an MCP server's own words: "github", "pull request").
    """
    alternatives = sorted({re.escape(w.strip()) for w in words if w.strip()}, key=len)
    if not alternatives:
        return None
    return re.compile(r"\b(" + "|".join(reversed(alternatives)) + r")\b", re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def _compiled(words: str) -> re.Pattern[str]:
    return re.compile(words, re.IGNORECASE)


def classify_intent(text: str, registry: ToolRegistry) -> Intent:
    """The intent of ``text`` by rules: the groups whose words it uses, and how sure that is.

    The words are the registry's (every feature's declared intents). Counts and compares
    about the user's own doings go to the structured count alone, so the model is not
    tempted to count search hits (widening adds search if it finds nothing).
    """
    kind = question_kind(text)
    groups = frozenset(
        name
        for name, words in registry.intent_words.items()
        if words and _compiled(words).search(text)
    )
    if kind in (QuestionKind.COUNT, QuestionKind.COMPARE):
        if groups <= {"memory"}:
            return Intent(frozenset({"count"}), Confidence.HIGH, kind)
        groups = groups | {"count"}
    return _by_size(groups, kind)


def _by_size(groups: frozenset[str], kind: QuestionKind) -> Intent:
    if len(groups) == 1:
        return Intent(groups, Confidence.HIGH, kind)
    if len(groups) == 2:  # two groups: still a focused request
        return Intent(groups, Confidence.MEDIUM, kind)
    return Intent(groups, Confidence.LOW, kind)


class Visibility:
    """Which tools one turn offers, widening a step at a time when the turn is stuck."""

    def __init__(self, registry: ToolRegistry, intent: Intent) -> None:
        self.registry = registry
        self.intent = intent
        self.confidence = intent.confidence
        """The current step; it only ever goes down (wider)."""

    def names(self) -> list[str]:
        """The tool names offered now, in registration order."""
        every = self.registry.tools()
        if self.confidence is Confidence.LOW:
            return [t.name for t in every]
        groups = self.intent.groups
        extra = RESOLUTION_TOOLS if self.confidence is Confidence.MEDIUM else ()
        return [t.name for t in every if not t.group or t.group in groups or t.name in extra]

    def widen(self, *, to_all: bool = False) -> bool:
        """Show more tools (one step, or all); False when everything is already shown."""
        if self.confidence is Confidence.LOW:
            return False
        self.confidence = Confidence.LOW if to_all else Confidence(self.confidence - 1)
        return True


_NOT_A_SEARCH = re.compile(
    r"\b(remember|forget|delete|remove|store|save|facts?|know about me)\b", re.IGNORECASE
)
"""Changes to memory, and questions about stored facts (list_facts answers those)."""
_A_QUESTION = re.compile(
    r"^\s*(what|when|where|who|whom|which|how|why|did|do|does|have|has|had|was|were|is|are)\b"
    r"|\?\s*$",
    re.IGNORECASE,
)
"""Asked, not ordered: "search both for me" or "find it, change it" may want other tools."""


def sure_memory_question(text: str, registry: ToolRegistry) -> bool:
    """A question only memory can answer, by rules: search it before the first model call.

    Exactly the memory group matched (high confidence), a plain fact question (counts and
    comparisons have their own tool), nothing asking to change what is stored, and not a
    question about the stored facts themselves; and asked as a question, not an order.
    """
    intent = classify_intent(text, registry)
    return (
        intent.groups == frozenset({"memory"})
        and intent.confidence is Confidence.HIGH
        and intent.kind is QuestionKind.FACT
        and not _NOT_A_SEARCH.search(text)
        and bool(_A_QUESTION.search(text))
    )
