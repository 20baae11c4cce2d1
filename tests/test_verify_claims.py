"""The default check (no model) catches claims about the user's life in any form (issue 30).

Claims are generated from subjects x tenses x verbs; each must be recognised, flagged when it
cites nothing or a source that does not say it, and pass when its source says it. Non-claims
(questions, offers, greetings, hedges, advice, lifebot's own actions) must pass untouched.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from bot.agent.claims import is_claim
from bot.agent.sources import SourceLedger
from bot.agent.verify import check_answer
from storage.models import MemoryItem

SUBJECTS = {
    "you": ("You", "you"),
    "your sister": ("Your sister", "she"),
    "your two kids": ("Your two kids", "they"),
    "a named person": ("Ana", "she"),
    "two named people": ("Ana and Rui", "they"),
    "you and a person": ("You and Ana", "they"),
    "he": ("He", "he"),
    "they": ("They", "they"),
    "we": ("We", "we"),
}
"""Subject as written, and the pronoun that picks the verb form."""
PLURAL = {"you", "they", "we"}
# (base, third person -s, past, participle) x a complement that names a place or time
VERBS = [
    ("live", "lives", "lived", "lived", "at 12 Rua Verde"),
    ("work", "works", "worked", "worked", "at the Porto clinic"),
    ("swim", "swims", "swam", "swum", "at the Alvalade pool on Tuesdays"),
    ("go", "goes", "went", "gone", "to Lisbon every March"),
    ("meet", "meets", "met", "met", "Jordan at the gym on Fridays"),
    ("keep", "keeps", "kept", "kept", "the spare key under the blue pot"),
]


def _forms(subject: str, pronoun: str, verb: tuple[str, str, str, str, str]) -> dict[str, str]:
    """The claim in several tenses."""
    base, third, past, part, rest = verb
    plural = pronoun in PLURAL
    be, have = ("are", "have") if plural else ("is", "has")
    stem = base.removesuffix("e")
    ing = stem + ("m" if base == "swim" else "") + "ing"
    return {
        "present": f"{subject} {base if plural else third} {rest}",
        "past": f"{subject} {past} {rest}",
        "continuous": f"{subject} {be} {ing} {rest}",
        "perfect": f"{subject} {have} {part} {rest}",
        "future": f"{subject} will {base} {rest}",
        "adverb": f"{subject} usually {base if plural else third} {rest}",
        "used to": f"{subject} used to {base} {rest}",
    }


def _claims() -> list[tuple[str, str, str, str]]:
    """(subject kind, tense, sentence, source text that says it)."""
    out = []
    for (kind, (subject, pronoun)), verb in itertools.product(SUBJECTS.items(), VERBS):
        for tense, sentence in _forms(subject, pronoun, verb).items():
            out.append((kind, tense, sentence + ".", f"note: {verb[4]} ({verb[0]})"))
    return out


CLAIMS = _claims()
MORE_CLAIMS = [
    "You live in Lisbon.",
    "Your sister lives at 12 Rua Verde.",
    "You're staying with Ana until Sunday.",
    "You've been to Porto three times.",
    "Your dentist appointment is on Friday at 9:30.",
    "The appointment is on Friday at 9:30.",
    "It was three days ago.",
    "Ana's birthday is on 4 May.",
    "Lisbon is where you moved in 2021.",
    "Sure, you ran 3 times in March.",
    "I found 3 runs in March.",
    "On Monday you met Jordan at the gym.",
    "Rui doesn't eat pork.",
    "She moved to Porto last year.",
    "They'll arrive on Saturday morning.",
    "You like jazz and long walks.",
    "Your kids swim on Tuesdays.",
    "Ana Silva works at the clinic.",
    "I counted 4 swims in May.",
    "I know you like jazz.",
]
NOT_CLAIMS = [
    "Do you live in Lisbon?",
    "Would you like me to remind you on Friday?",
    "Want me to set a reminder for 9:30?",
    "I can add it to your calendar.",
    "I'll remind you on Friday at 9.",
    "I've added milk to your shopping list.",
    "I set a reminder for tomorrow at 8.",
    "Hi Ana!",
    "Good morning!",
    "You're welcome!",
    "Thanks for telling me.",
    "Thank you so much.",
    "Maybe you were thinking of Porto.",
    "I'm not sure where your sister lives.",
    "You could try the new cafe on Rua Verde.",
    "You should drink more water.",
    "You might want to call Ana first.",
    "You have to leave by 8 to make it.",
    "Remember to call Ana tomorrow.",
    "I couldn't find anything about Lisbon.",
    "Nothing is stored about a scuba trip.",
    "Let me know if you need anything else.",
    "Added.",
    "Great!",
    "Sounds good.",
    "If you want, I can look for more.",
    "Happy to help with the move.",
    "Enjoy your trip to Lisbon!",
    "I know it is hard.",
    "I understand, that sounds tiring.",
    "Here you go.",
    "Ready when you are.",
]


def _ledger(*snippets: str) -> SourceLedger:
    ledger = SourceLedger()
    for i, snippet in enumerate(snippets, start=1):
        ledger.add(
            MemoryItem(user_id=1, kind="message", source_id=i, text=snippet, ts=datetime.now(UTC))
        )
    return ledger


def test_every_generated_claim_is_recognised() -> None:
    missed = [s for _, _, s, _ in CLAIMS if not is_claim(s)]
    missed += [s for s in MORE_CLAIMS if not is_claim(s)]
    total = len(CLAIMS) + len(MORE_CLAIMS)
    print(f"{total - len(missed)}/{total} claims recognised")
    assert missed == []


def test_non_claims_are_left_alone() -> None:
    wrongly = [s for s in NOT_CLAIMS if is_claim(s)]
    assert wrongly == []


@pytest.mark.parametrize("kind", list(SUBJECTS))
def test_an_uncited_claim_is_flagged_when_a_search_gave_sources(kind: str) -> None:
    # A search this turn numbered its sources: every claim must cite one of them.
    ledger = _ledger("Booked the dentist for Friday at 9:30")
    for k, tense, sentence, _ in CLAIMS:
        if k == kind:
            verdict = check_answer(sentence, ledger, ["[1] Booked the dentist"])
            assert [p.kind for p in verdict.problems] == ["uncited"], (tense, sentence)


@pytest.mark.parametrize("kind", list(SUBJECTS))
def test_a_claim_citing_a_source_that_says_it_passes(kind: str) -> None:
    for k, tense, sentence, source in CLAIMS:
        if k == kind:
            cited = sentence[:-1] + " [1]."
            assert check_answer(cited, _ledger(source), []).ok, (tense, cited)
            wrong = check_answer(cited, _ledger("Bought bread and eggs on Monday"), [])
            assert [p.kind for p in wrong.problems] == ["unsupported"], (tense, cited)


def test_the_issue_s_sentences_need_a_source() -> None:
    for sentence in ("Your sister lives at 12 Rua Verde.", "You live in Lisbon."):
        verdict = check_answer(sentence, _ledger(), [])
        assert not verdict.ok, sentence
        cited = check_answer(sentence[:-1] + " [1].", _ledger(sentence.replace("You", "I")), [])
        assert cited.ok, sentence


def test_a_mixed_answer_flags_only_its_claims() -> None:
    answer = (
        "Sure! Your sister lives at 12 Rua Verde [1]. She moved to Porto in 2021. "
        "Would you like me to add her address to your contacts?"
    )
    verdict = check_answer(answer, _ledger("my sister lives at 12 Rua Verde"), [])
    assert [p.sentence for p in verdict.problems] == ["She moved to Porto in 2021."]


def test_with_the_memory_s_names_only_known_names_make_a_claim() -> None:
    known = {"ana", "rui", "porto", "lisbon"}
    for sentence in ("Ana moved to Porto.", "Rui doesn't eat pork.", "Lisbon is where you moved.",
                     "Ana's dog is called Biscuit.", "Ana and Rui went to Braga."):  # fmt: skip
        assert is_claim(sentence, known), sentence
    for sentence in ("Slack wants *this* for bold.", "Python runs on Windows too.",
                     "Markdown uses two asterisks.", "Standup is at 10."):  # fmt: skip
        assert is_claim(sentence) and not is_claim(sentence, known), sentence
    # "you" and "your" need no list: they are always the user
    assert is_claim("Your sister lives at 12 Rua Verde.", known)
    verdict = check_answer("Ana moved to Porto. Slack wants *this*.", _ledger(), [], known)
    assert [p.sentence for p in verdict.problems] == ["Ana moved to Porto."]
