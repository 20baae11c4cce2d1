"""A check before answering: claims about the user's life must rest on this turn's tool results.

Rules first, no model: the answer is cut into sentences; a sentence that states something
about the user's life, their people, places or times, in any tense or verb form ("You live
in Lisbon", "Your sister lives at 12 Rua Verde", "Ana moved to Porto", "The appointment is on
Friday") is a claim (``claims.is_claim``). A claim
citing [n] must share its content words with source n (or the tool result that showed it,
where a count's total stands); a claim citing nothing is accepted
only when the turn's tools gave no numbered sources at all and some tool result this turn
says the same thing (tasks, reminders and events come back without numbers). Everything
else is a problem the controller repairs with one more round, or states plainly as unknown.

When configured, the fast model is asked as a second opinion on answers the rules pass.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from bot.agent.claims import is_claim
from bot.agent.llm import LLM, parse_json_object
from bot.agent.sources import SourceLedger
from bot.errors import AgentError

log = logging.getLogger(__name__)

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CITE = re.compile(r"\[(\d{1,3})\]")
_WORD = re.compile(r"[a-z]+|\d+")
_STOP = frozenset(
    [
        "your",
        "you've",
        "youre",
        "about",
        "after",
        "again",
        "also",
        "been",
        "before",
        "being",
        "could",
        "does",
        "doing",
        "from",
        "have",
        "having",
        "into",
        "just",
        "like",
        "more",
        "most",
        "much",
        "only",
        "other",
        "over",
        "same",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "very",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "yours",
        "times",
    ]
)
MIN_SHARED = 0.34
"""The share of a claim's content words its cited source must contain."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One claim the check did not accept."""

    sentence: str
    """The sentence as the answer put it."""
    kind: str
    """``uncited`` (no source given) or ``unsupported`` (its sources do not say it)."""


@dataclass(slots=True)
class Verdict:
    """What the check found in one answer."""

    problems: list[Problem] = field(default_factory=list)
    """Claims not resting on this turn's tool results."""

    @property
    def ok(self) -> bool:
        """True when every claim about the user's life is grounded."""
        return not self.problems

    def describe(self) -> str:
        """The problems as a short note for the repair round."""
        return "\n".join(f"- {p.kind}: {p.sentence}" for p in self.problems)


def _content(text: str) -> set[str]:
    """Content words (first five letters, so "running" meets "runs") and whole numbers."""
    out: set[str] = set()
    for word in _WORD.findall(_CITE.sub(" ", text.lower())):
        if word.isdigit():
            out.add(word)
        elif len(word) >= 4 and word not in _STOP:
            out.add(word[:5])
    return out


def _supported(claim: str, evidence: str) -> bool:
    words = _content(claim)
    if not words:
        return True
    shared = words & _content(evidence)
    return len(shared) >= max(1, math.ceil(MIN_SHARED * len(words)))


def sentences(text: str) -> list[str]:
    """The answer cut into sentences (lines count as breaks too)."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def tool_results(transcript: list[dict[str, Any]]) -> list[str]:
    """The text of every tool result in a turn's transcript."""
    return [str(m.get("content") or "") for m in transcript if m.get("role") == "tool"]


def check_answer(
    answer: str,
    ledger: SourceLedger,
    results: list[str],
    names: Collection[str] | None = None,
) -> Verdict:
    """The rules: every claim cites a source that says it, or (no numbered sources) a result.

    ``names``: people and places the user's memory knows (see ``claims.is_claim``).
    """
    verdict = Verdict()
    for sentence in sentences(answer):
        if not is_claim(sentence, names):
            continue
        cited = [int(n) for n in _CITE.findall(sentence) if int(n) in ledger.entries]
        if cited:
            # A source's own text, and the result that showed it (a count's total, a date).
            shown = [r for r in results if any(f"[{n}]" in r for n in cited)]
            evidence = " ".join([*(ledger.entries[n].snippet for n in cited), *shown])
            if not _supported(sentence, evidence):
                verdict.problems.append(Problem(sentence, "unsupported"))
        elif ledger.entries or not any(_supported(sentence, r) for r in results):
            verdict.problems.append(Problem(sentence, "uncited"))
    return verdict


JUDGE_PROMPT = """\
You check an assistant's answer against the sources it was given. Answer with JSON only:
{"grounded": true} if every statement about the user's life is supported by the sources, or
{"grounded": false, "claim": "<the first unsupported statement>"}."""


async def judge(llm: LLM, answer: str, ledger: SourceLedger, results: list[str]) -> Verdict:
    """The fast model's second opinion; a model failure passes the answer (rules already did)."""
    sources = "\n".join(f"[{n}] {c.snippet}" for n, c in ledger.entries.items())
    evidence = (sources + "\n" + "\n".join(results))[:6000]
    try:
        raw = await llm.complete(
            [
                {"role": "system", "content": JUDGE_PROMPT},
                {"role": "user", "content": f"Sources:\n{evidence}\n\nAnswer:\n{answer[:3000]}"},
            ],
            fast=True,
            json_mode=True,
        )
    except AgentError as exc:
        log.info("verifier model unavailable: %s", exc)
        return Verdict()
    verdict = parse_json_object(raw)
    if verdict.get("grounded", True) is False:
        return Verdict([Problem(str(verdict.get("claim") or answer)[:300], "unsupported")])
    return Verdict()


def plain_unknown(answer: str, verdict: Verdict, names: Collection[str] | None = None) -> str:
    """The answer without its ungrounded claims, saying plainly what is not known."""
    bad = {p.sentence for p in verdict.problems}
    kept = [s for s in sentences(answer) if s not in bad]
    if not [s for s in kept if is_claim(s, names)]:
        return (
            "I don't know: nothing I found in your records this time supports an answer, "
            "and I won't guess."
        )
    return " ".join(kept) + "\n\n(I left out what I couldn't back up from your records.)"
