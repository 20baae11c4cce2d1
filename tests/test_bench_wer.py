"""The word error rate that ``bench wer`` reports per speech model (#23)."""

from __future__ import annotations

import pytest

from bench.wer import wer, words


def test_punctuation_case_and_spelled_numbers_are_not_errors() -> None:
    assert words("The train leaves at 7.30!") == ["the", "train", "leaves", "at", "seven", "thirty"]
    assert wer(["Remember to buy bread"], ["remember, to buy bread."]) == 0.0


def test_substitutions_deletions_and_insertions_count_over_reference_words() -> None:
    # "Add a" heard as "I'm": one substitution and one deletion in a six-word sentence.
    assert wer(["Add a meeting with Anna today"], ["I'm meeting with Anna today"]) == pytest.approx(
        2 / 6
    )
    assert wer(["buy bread", "call mum"], ["buy the bread", "call mum"]) == pytest.approx(1 / 4)
