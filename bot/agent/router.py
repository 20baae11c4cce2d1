"""Route a message: deterministic rules first, an LLM classification only when ambiguous."""

from __future__ import annotations

import enum
import logging
import re

from bot.agent.llm import LLM, parse_json_object
from bot.errors import AgentError

log = logging.getLogger(__name__)


class Route(enum.Enum):
    """What kind of handling a message needs."""

    COMMAND = "command"
    """A slash command: handled without the LLM."""
    REMEMBER = "remember"
    """"remember ...": stored as a fact without the LLM."""
    CHAT = "chat"
    """Small talk: one LLM call, no tools."""
    AGENT = "agent"
    """Needs the tool loop."""
    WHY = "why"
    """"why?" / "sources?": show the sources of the last answer, without the LLM."""
    FORGET_THAT = "forget_that"
    """"forget that": forget the fact just stored or cited, without the LLM."""


_GREETING = re.compile(
    r"^\s*(hi|hello|hey|hiya|yo|good (morning|afternoon|evening)|thanks|thank you|thx|ok|okay|"
    r"cool|great|nice|bye|good night|gm|gn)( there)?( lifebot)?\s*[!.?\u263a-\U0001faff ]*$",
    re.IGNORECASE,
)
_REMEMBER = re.compile(
    r"^\s*(please\s+)?remember( that)?[:,]?\s+(?P<fact>.{2,})$", re.IGNORECASE | re.DOTALL
)
_TOOLISH = re.compile(
    r"\b(task|tasks|todo|to-do|remind|reminder|time zone|timezone|what time|remember|forget|"
    r"fact|facts|know about me|did i|have i|when did|what did|who is|who's|my |schedule|"
    r"calendar|note|notes|yesterday|today|tomorrow|last week|search|find|journal|mood|stress|"
    r"stressed|happiness|energy|lately|action items|in review|chart|graph|"
    # questions about the user's own days go to the calendar tools, never to small talk
    r"what do i have|do i have anything|am i (?:busy|free)|agenda|appointments?|meetings?|"
    r"this week|next week|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.IGNORECASE,
)

_WORLD = re.compile(
    r"\b(weather|forecast|temperature|news|headlines?|price of|stock price|exchange rate|"
    r"who won|final score|opening hours|open (now|today|tonight|on \w+)|population of|"
    r"capital of|latest version|release date|election|president of|prime minister|"
    r"flight status|traffic on)\b",
    re.IGNORECASE,
)
"""The outside world: memory cannot know it, the web can (routed to the agent and its tools)."""
_PERSONAL = re.compile(
    r"\b(my|mine|myself|our|ours)\b|\babout (me|us)\b|\b(did|have|was|were|am|do) (i|we)\b|"
    r"\b(i|we) (told|said|met|saw|went|had|was|were|talked|asked|promised)\b",
    re.IGNORECASE,
)
"""The user's own life and people: memory first."""
_WHY = re.compile(
    r"^\s*(why|why\s+is\s+that|how\s+do\s+you\s+know(\s+that)?|what\s+are\s+your\s+sources|"
    r"sources|source|where\s+did\s+you\s+get\s+that(\s+from)?)\s*[?!.]*\s*$",
    re.IGNORECASE,
)
_FORGET_THAT = re.compile(
    r"^\s*(please\s+)?(forget|delete|remove)\s+(that|this|it)(\s+please)?\s*[!.]*\s*$",
    re.IGNORECASE,
)

CLASSIFY_PROMPT = """\
Classify the user's message for a personal assistant. Answer with JSON only:
{"route": "chat"} if it is small talk or general knowledge needing nothing personal, or
{"route": "agent"} if it may need the user's notes, facts, tasks, time or any action."""


def remember_text(text: str) -> str | None:
    """The fact in a "remember ..." message, or None."""
    m = _REMEMBER.match(text)
    return m.group("fact").strip() if m else None


def route_by_rules(text: str) -> Route | None:  # noqa: PLR0911  (a ladder of rules)
    """The route when a rule decides it, else None (ambiguous)."""
    stripped = text.strip()
    if stripped.startswith("/"):
        return Route.COMMAND
    if remember_text(stripped):
        return Route.REMEMBER
    if _WHY.match(stripped):
        return Route.WHY
    if _FORGET_THAT.match(stripped):
        return Route.FORGET_THAT
    if _GREETING.match(stripped):
        return Route.CHAT
    if _TOOLISH.search(stripped) or _WORLD.search(stripped):
        return Route.AGENT
    return None


def prefers(text: str) -> str | None:
    """Where to look first: ``web`` for the outside world, ``memory`` for the user's own life.

    The outside world wins when both appear ("the weather in Lisbon when I land"): memory has
    no forecasts. None when neither is clear (the model decides from the tool descriptions).
    """
    if _WORLD.search(text):
        return "web"
    if _PERSONAL.search(text):
        return "memory"
    return None


class Router:
    """Decides how a message is handled."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    async def route(self, text: str) -> Route:
        """Rules first; the fast model only for ambiguous messages; AGENT when unsure."""
        decided = route_by_rules(text)
        if decided is not None:
            return decided
        try:
            answer = await self.llm.complete(
                [
                    {"role": "system", "content": CLASSIFY_PROMPT},
                    {"role": "user", "content": text[:2000]},
                ],
                fast=True,
                json_mode=True,
            )
        except AgentError as exc:
            log.info("router fell back to the agent: %s", exc)
            return Route.AGENT
        verdict = str(parse_json_object(answer).get("route", "agent")).lower()
        return Route.CHAT if verdict == "chat" else Route.AGENT
