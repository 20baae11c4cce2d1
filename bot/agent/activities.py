"""Did the user do an activity, by the meaning of their words (not by substring).

"I went for a run", "Ran 5k before work", "this morning's run" and "a quick jog" are runs;
"running late", "ran out of milk", "running low on coffee", "new running shoes" and "Ben ran a
half marathon" are not. Each known activity has its words (all their forms, and words that
mean the same) and the senses of those words that are something else; any other activity is
matched by its words in every inflection. A mention counts only when it is not negated
("skipped my run") and its subject is the user (I, we, or no subject, as in a diary line),
not someone else ("she ran", "Ben ran").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.errors import ToolError


@dataclass(frozen=True, slots=True)
class Activity:
    """What to look for when counting one activity."""

    name: str
    """As the user asked for it ("run")."""
    words: re.Pattern[str]
    """Any word or phrase that names it ("run", "ran", "jogging", "5k")."""
    other_senses: re.Pattern[str] | None = None
    """Applied at the matched word: a sense that is not the activity ("running late")."""


def _forms(*bases: str) -> str:
    return "|".join(bases)


_KNOWN: dict[str, tuple[str, str | None]] = {
    "run": (
        _forms(r"run(?:s|ning)?", "ran", r"jog(?:s|ged|ging)?", r"parkrun"),
        r"run(?:s|ning)?\s+(?:late|low|short|behind|out|into|over|through|errands|away|"
        r"a\s+(?:fever|temperature|business|company|shop|meeting|risk|test|script|bath|tap)|"
        r"the\s+(?:show|meeting|company|numbers|tests?|risk|bath|tap)|for\s+(?:office|"
        r"president|mayor)|on\s+(?:empty|fumes|time))\b"
        r"|ran\s+(?:late|low|short|behind|out|into|over|through|errands|away|a\s+(?:fever|"
        r"temperature|business|company|shop|meeting|risk|test|script|bath))\b"
        r"|running\s+(?:shoes?|shorts|gear|socks|jacket|watch|app|water|costs?|joke|"
        r"commentary|total|order)\b|long\s+run\b",
    ),
    "swim": (
        _forms(r"swim(?:s|ming)?", "swam", "swum", r"laps?\b"),
        r"swim(?:ming)?\s+(?:suit|costume|trunks|cap|goggles|bag)\b|head\s+(?:is\s+)?swim",
    ),
    "walk": (
        _forms(r"walk(?:s|ed|ing)?", r"stroll(?:s|ed|ing)?"),
        r"walk(?:s|ed|ing)?\s+(?:out|away|through|in\s+closet|me\s+through)\b|walk-in",
    ),
    "gym": (
        _forms(
            r"gym",
            r"work(?:ed|ing)?\s+out",
            r"workouts?",
            r"lift(?:ed|ing)?\s+weights",
            r"weights\s+session",
        ),
        r"gym\s+(?:bag|membership|fees?|card)\b",
    ),
    "cycle": (
        _forms(
            r"cycl(?:e|es|ed|ing)",
            r"bik(?:e|es|ed|ing)\s*(?:ride)?",
            r"bike\s+ride",
            r"rode\s+(?:my|the|a)\s+bike",
        ),
        r"cycle\s+(?:of|through)\b|(?:business|news|wash|spin)\s+cycle",
    ),
}
_ALIASES = {
    "running": "run", "jog": "run", "jogging": "run", "swimming": "swim", "walking": "walk",
    "workout": "gym", "work out": "gym", "exercise": "gym", "cycling": "cycle", "bike": "cycle",
    "biking": "cycle", "ride": "cycle",
}  # fmt: skip
_IRREGULAR = {
    "go": ("went", "gone"), "eat": ("ate", "eaten"), "ride": ("rode",), "drink": ("drank",),
    "see": ("saw", "seen"), "meet": ("met",), "buy": ("bought",), "sleep": ("slept",),
    "write": ("wrote",), "read": ("read",), "swim": ("swam", "swum"), "run": ("ran",),
    "climb": ("climbed",), "teach": ("taught",), "fly": ("flew",), "drive": ("drove",),
}  # fmt: skip


def activity(what: str) -> Activity:
    """The activity to count for the user's words ("run", "going to the gym", "yoga")."""
    words = [w for w in re.findall(r"[a-z]+", what.lower()) if len(w) > 1]
    if not words:
        raise ToolError("say what to count, e.g. 'run' or 'gym'")
    phrase = " ".join(words)
    key = _ALIASES.get(phrase, phrase)
    for w in (key, *words):
        key = _ALIASES.get(w, w)
        if key in _KNOWN:
            forms, senses = _KNOWN[key]
            return Activity(
                what,
                re.compile(rf"\b(?:{forms})\b", re.IGNORECASE),
                re.compile(rf"\b(?:{senses})", re.IGNORECASE) if senses else None,
            )
    forms_: list[str] = []
    for w in words:
        if w in ("go", "going", "to", "the", "a", "my", "for", "do", "did", "have", "some"):
            continue
        stem = w.removesuffix("e")
        forms_.append(rf"{re.escape(stem)}\w*")
        forms_ += [re.escape(f) for f in _IRREGULAR.get(w, ())]
    if not forms_:
        raise ToolError("say what to count, e.g. 'run' or 'gym'")
    return Activity(what, re.compile(rf"\b(?:{'|'.join(forms_)})\b", re.IGNORECASE))


_NEGATION = re.compile(
    r"\b(didn't|did not|don't|no|not|never|skipped|skip|skipping|missed|without|cancel(?:l?ed)?|"
    r"couldn't|could not|can't|won't|wasn't able to|instead of|too \w+ (?:to|for))\W+"
    r"(\w+\W+){0,3}$",
    re.IGNORECASE,
)
_SOMEONE_ELSE = re.compile(
    r"(?:^|[.!?;,:]\s*|\b(?:and|but|while|because|so|then)\s+)"
    r"(?P<who>he|she|they|it|[A-Z][a-z]+(?:\s+(?:and\s+)?[A-Z][a-z]+)?)"
    r"(?:'s)?(?:\s+(?:has|had|was|is|were|are|also|just|then|finally|did|went|goes|go|will|"
    r"would|always|usually|often|never|for|a|an|to|out|on|the|his|her|their|been|going)){0,4}"
    r"\s+$",
    re.IGNORECASE,
)
"""Someone else as the subject just before the activity ("Ben ran", "she went for a run")."""
_NOT_SUBJECTS = frozenset(
    {"i", "we", "my", "our", "ok", "okay", "so", "went", "ran", "did", "had", "got", "today",
     "yesterday", "this", "finally", "first", "another", "then", "after", "before", "also",
     "just", "back", "great", "good", "nice", "lovely", "morning", "evening", "tonight"}
)  # fmt: skip


def _someone_else(before: str) -> bool:
    m = _SOMEONE_ELSE.search(before)
    if m is None:
        return False
    who = m.group("who")
    if who.lower() in ("he", "she", "they"):
        return True
    first = who.split()[0]
    # A name (capitalised as written), not the user ("I", "we") nor a diary opener.
    return first[0].isupper() and first.lower() not in _NOT_SUBJECTS and " I" not in f" {who}"


def did(act: Activity, text: str) -> bool:
    """The line says the user did the activity (see the module doc)."""
    for m in act.words.finditer(text):
        if act.other_senses is not None and any(
            o.start() <= m.start() < o.end() for o in act.other_senses.finditer(text)
        ):
            continue
        before = text[: m.start()]
        if _NEGATION.search(before) or _someone_else(before):
            continue
        return True
    return False
