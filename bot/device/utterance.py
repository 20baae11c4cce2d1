"""Utterances on their way through the pipeline, and the wake phrase."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_WORD = re.compile(r"[A-Za-z0-9']+")


@dataclass(frozen=True, slots=True)
class Utterance:
    """An utterance waiting for transcription (a database row's essentials)."""

    segment_id: int
    seq: int
    start: int
    end: int
    mode: str
    spoken_at: datetime


@dataclass(frozen=True, slots=True)
class Heard:
    """A transcribed utterance waiting for delivery."""

    utterance: Utterance
    text: str
    """Everything that was heard."""
    route: str
    """``ask`` (a question for the agent), ``ambient`` (kept), ``wake`` or ``empty``."""
    question: str = ""
    """For ``ask``: the words the agent gets (the wake phrase removed)."""


@dataclass(frozen=True, slots=True)
class Typed:
    """A typed question waiting for delivery."""

    text: str
    client_id: str


def strip_wake_phrase(text: str, phrase: str) -> str | None:
    """The words after the wake phrase when ``text`` starts with it, else None.

    Punctuation and case are ignored, and "life bot" counts as "lifebot" (Whisper writes both).
    """
    matches = list(_WORD.finditer(text))
    words = [m.group().lower() for m in matches]
    used = 0
    for want in (w.lower() for w in _WORD.findall(phrase)):
        if words[used : used + 1] == [want]:
            used += 1
        elif want == "lifebot" and words[used : used + 2] == ["life", "bot"]:
            used += 2
        else:
            return None
    if used == len(matches):
        return ""
    return text[matches[used].start() :].strip()
