"""Buttons on a pendant: offered in words, answered by voice ("yes", "no") or a typed reply.

A pendant has no screen to tap, so when lifebot sends a message with buttons (a proposed
event's Yes/No), the device is told the choices and the wearer's next utterance is matched
against them. A match is delivered exactly like a button press (``callback_data``); anything
else is an ordinary message and withdraws the offer, so a later unrelated "yes" never
accepts something by accident.
"""

from __future__ import annotations

import re

from bot.messages import Button

YES_WORDS = frozenset(
    {"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "yes please", "please do", "do it",
     "go ahead", "sounds good", "correct", "add it"}
)  # fmt: skip
NO_WORDS = frozenset(
    {"no", "nope", "nah", "no thanks", "no thank you", "don't", "do not", "cancel", "skip it",
     "not now"}
)  # fmt: skip
_SYNONYMS = {"yes": YES_WORDS, "no": NO_WORDS}


def normalise(text: str) -> str:
    """Lower case, punctuation and extra spaces removed ("Yes, please!" -> "yes please")."""
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


def matches(label: str, heard: str) -> bool:
    """Whether ``heard`` chooses the button labelled ``label``."""
    want, got = normalise(label), normalise(heard)
    return got == want or got in _SYNONYMS.get(want, frozenset())


def spoken_prompt(buttons: list[Button]) -> str:
    """The words that tell the wearer how to answer: "(Say Yes or No.)"."""
    labels = [b.label for b in buttons]
    said = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + f" or {labels[-1]}"
    return f"(Say {said}.)"


class SpokenChoices:
    """The buttons last offered to each device, waiting for a spoken answer."""

    def __init__(self) -> None:
        self._offers: dict[str, list[Button]] = {}

    def offer(self, chat_id: str, buttons: list[Button]) -> None:
        """Remember the choices just offered to a device (replacing older ones)."""
        self._offers[chat_id] = list(buttons)

    def take(self, chat_id: str, heard: str) -> str | None:
        """The chosen button's data when ``heard`` answers the offer; the offer ends either way."""
        buttons = self._offers.pop(chat_id, None)
        for button in buttons or []:
            if matches(button.label, heard):
                return button.data
        return None
