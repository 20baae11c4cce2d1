"""A generated journal with planted patterns, and a fake-LLM responder that scores it.

``planted_journal`` writes one entry a day for ``days`` days ending ``today``:
- an ordinary baseline (stress ~40, happiness ~60, energy ~55, small daily wiggle);
- a stressful fortnight (days ``STRESS_START`` .. +13 before today: stress ~85, work deadline);
- an improving month (``IMPROVE_START`` .. +29 days before today: happiness rises 35 -> 80);
- the last week: stress rising day by day (a sleep and work crunch).
The responder answers scoring prompts with each entry's planted truth, as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from tests.fakes.llm import Step

STRESS_START = 110
"""The stressful fortnight starts this many days before today."""
IMPROVE_START = 60
"""The improving month starts this many days before today."""


@dataclass(frozen=True, slots=True)
class PlantedEntry:
    """One generated entry and the scores the fake model gives it."""

    day: date
    text: str
    happiness: float
    stress: float
    energy: float
    themes: list[str]
    people: list[str]


def planted_journal(today: date, days: int = 150) -> list[PlantedEntry]:
    """See the module doc."""
    out: list[PlantedEntry] = []
    for back in range(days - 1, -1, -1):
        day = today - timedelta(days=back)
        wiggle = ((back * 7) % 5) - 2  # deterministic -2..2
        happy, stress, energy = 60.0 + wiggle, 40.0 - wiggle, 55.0 + wiggle
        themes, people = ["home"], ["Ana"] if back % 3 == 0 else []
        text = f"Ordinary day {day.isoformat()}: cooked dinner, read a book."
        if STRESS_START - 13 <= back <= STRESS_START:
            happy, stress, energy = 30.0 + wiggle, 85.0 + wiggle, 35.0
            themes, people = ["work", "deadline"], ["Marta"]
            text = f"{day.isoformat()}: the launch deadline again, Marta pushing, stayed late."
        elif IMPROVE_START - 29 <= back <= IMPROVE_START:
            step = IMPROVE_START - back  # 0..29
            happy, stress, energy = 35.0 + 1.5 * step, 55.0 - step, 45.0 + step
            themes, people = ["exercise", "friends"], ["Leo"]
            text = f"{day.isoformat()}: morning run with Leo, feeling a bit better each week."
        elif back < 7:
            stress = 50.0 + 6 * (7 - back)  # rising over the last week
            happy, energy = 50.0 - 2 * (7 - back), 45.0
            themes, people = ["sleep", "work"], ["Marta"]
            text = f"{day.isoformat()}: slept badly, Marta moved the review up, inbox piling up."
        out.append(PlantedEntry(day, text, happy, stress, energy, themes, people))
    return out


class ScoringModel:
    """A FakeLLM ``default``: planted scores for planted texts, a numbered narrative for
    summary requests; any other call fails loudly."""

    def __init__(
        self, entries: list[PlantedEntry], extra: dict[str, dict[str, Any]] | None = None
    ) -> None:
        self.table = {e.text: e for e in entries}
        self.extra = dict(extra or {})
        """Scores for texts written by the test itself (edits)."""
        self.narratives: list[str] = []
        """The prompts of every narrative the smart model was asked to write."""

    def __call__(self, body: dict[str, Any]) -> Step:
        system = str(body["messages"][0]["content"])
        if "short, warm review" in system:
            assert body["model"] == "fake-smart"
            self.narratives.append(str(body["messages"][-1]["content"]))
            return Step(text=f"NARRATIVE {len(self.narratives)}: a period with ups and downs.")
        if "rate one personal journal entry" not in system:
            raise AssertionError(f"unscripted LLM call: {system[:80]!r}")
        assert body["model"] == "fake-fast"
        text = json.loads(body["messages"][-1]["content"])["entry"]
        if text in self.extra:
            return Step(text=json.dumps(self.extra[text]))
        e = self.table.get(text)
        if e is None:
            raise AssertionError(f"the fake has no scores for {text[:60]!r}")
        scores = {
            "happiness": e.happiness,
            "stress": e.stress,
            "energy": e.energy,
            "themes": e.themes,
            "people": e.people,
            "reason": "planted",
        }
        return Step(text=json.dumps(scores))
