"""Which sentences of an answer state something about the user's life (no model needed).

A claim has a subject from the user's life and a finite verb, in any tense:

- the user: "you" as a subject ("You live in Lisbon", "you've been", "You and Ana went"),
  "your ..." as a subject ("Your sister lives at 12 Rua Verde"), "we" ("We talked on Monday");
- their people and places: a name as a subject ("Ana moved to Porto", "Lisbon is where ..."),
  or "he", "she", "they";
- their times: a sentence naming a time whose subject is "it", "that", "there" or "the ..."
  ("The appointment is on Friday at 9:30", "It was three days ago");
- what lifebot reports having seen in their records ("I found 3 runs in March").

Not claims: questions, offers ("Would you like ...", "I can ..."), greetings and thanks,
hedges ("maybe", "I'm not sure"), advice ("you could", "you should"), instructions to the
user, and lifebot's own actions ("I'll remind you", "I've added it to your list").
"""

from __future__ import annotations

import re
from collections.abc import Collection


def _words(text: str) -> frozenset[str]:
    """A word list written as one string (these lists read better as prose)."""
    return frozenset(text.split())


_TOKEN = re.compile(r"[A-Za-z][A-Za-z'\u2019-]*|\d+(?::\d+)?|[.,;:!?()\[\]\u2013\u2014-]")
_FUNCTION = _words(
    "a an the this that these those some any no every each all both either neither to of in on "
    "at by for with about from into onto over under after before since until as than "
    "and or but so if because while though although when where whether not too very back "
    "here there now then up down out off again once soon later today tomorrow tonight yesterday "
    "please anyway well"
)
"""Words that never are the verb after a subject ("remind you about", "thank you so much")."""
_BEFORE_OBJECT = _words(
    "let lets make made help helps have has had want wants need needs remind reminds ask asked "
    "tell told get got thank thanks see give gave send sent show showed bring call text email "
    "for to with at of about on from by without like than into onto behind near"
)
"""A word before "you"/"your" that makes it an object ("let you know", "to your list")."""
_CONDITIONAL = frozenset(
    {"if", "unless", "whether", "once", "whenever", "maybe", "perhaps", "when", "before", "after",
     "until", "till"}
)  # fmt: skip
"""Before these, "you" starts a condition or a time clause, not a claim ("when you are")."""
_ADVERB = re.compile(
    r"^(?:\w+ly|also|still|already|never|often|always|just|both|all|really|then|once|ever|"
    r"even|now|sometimes|mostly|first|finally|recently|again|not|n't)$",
    re.IGNORECASE,
)
_ADVICE = _words(
    "can could might may should must ought would can't couldn't shouldn't mustn't wouldn't better"
)
"""Modal verbs of advice, offers and possibility ("you could try"): not a claim."""
_AUX = _words(
    "is are was were be been being am has have had do does did will won't isn't aren't wasn't "
    "weren't hasn't haven't hadn't doesn't don't didn't 's 're 've 'll 'd"
)
_IRREGULAR_PAST = _words(
    "went ran saw met had made took came left got bought wrote ate slept spent said told "
    "thought felt knew found gave sent kept lost paid sold swam drove flew rode began drank "
    "sang sat stood won wore heard held led read built caught taught brought fought chose "
    "became broke forgot spoke woke grew threw drew fell hid hit hurt let put quit set shut "
    "split spread understood"
)
_NOT_NAMES = _words(
    "I I'm I've I'll I'd You Your We He She They It This That These Those There Here The A An "
    "Sure Great Yes No Okay Ok OK Thanks Thank Done Added Noted Hi Hello Hey Sorry Good Nice "
    "Also And But So Then Unfortunately Remember Please Let Note Based According Of In On At "
    "For From To With Well Oh Ah Alright Right Perfect Got Welcome Here's There's It's That's "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May "
    "June July August September October November December Today Tomorrow Yesterday Tonight "
    "Would Could Should Can Do Did Does Is Are Was Were Will Want Shall Maybe Perhaps Nothing "
    "None Everything Something Someone Nobody Everyone What Which Who When Where Why How Just "
    "Only Every Each Any Some Most Many Here"
)
_UNKNOWN = re.compile(
    r"\b(don't know|do not know|not sure|no record|nothing (about|on|in|stored)|couldn't find|"
    r"could not find|can't find|cannot find|found nothing|no sources|can't tell|cannot tell|"
    r"too little|not enough|no idea|no information)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(maybe|perhaps|possibly|probably|i think|i guess|i believe|it seems|seems like|"
    r"might have|may have|could have|not certain)\b",
    re.IGNORECASE,
)
_NOT_STATEMENT = re.compile(
    r"^\W*(would you|do you want|shall i|should i|want me|let me|i can|i could|i'd be|i would|"
    r"i'll|i will|i've (added|set|saved|created|booked|scheduled|noted|moved|cancel)|"
    r"i (added|set|saved|created|booked|scheduled|noted|moved|cancel\w*|removed|deleted)\b|"
    r"if you|feel free|happy to|glad|you're welcome|you are welcome|thanks|thank you|hi\b|"
    r"hello|hey\b|good (morning|afternoon|evening|night)|no problem|sorry|remember to|"
    r"here you (go|are)|there you (go|are)|see you|you bet|"
    r"don't forget|please|try\b|consider\b|enjoy\b|have a (good|great|nice))",
    re.IGNORECASE,
)
"""Offers, greetings, thanks, lifebot's own actions and instructions to the user."""
_REPORTING = re.compile(
    r"^\W*i\s+(found|counted|count|noted|have (?:a )?records? of|(?:can )?see \d|saw \d)\b",
    re.IGNORECASE,
)
"""What lifebot reports from the records ("I found 3 runs"), not "I know" or "I see"."""
_TIME = re.compile(
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|"
    r"april|may|june|july|august|september|october|november|december|yesterday|today|"
    r"tonight|tomorrow|ago|last (?:week|month|year|night|weekend)|next (?:week|month|year)|"
    r"(?:19|20)\d{2}|\d{1,2}:\d{2}|\d{1,2}\s*(?:am|pm)|morning|afternoon|evening)\b",
    re.IGNORECASE,
)
_OPENER = re.compile(
    r"^\W*(?:(?:sure|yes|yeah|ok|okay|right|great|good news|so|well|also|and|but|according to "
    r"\S+|based on \S+)\s*[,:!\u2013\u2014-]\s*)+",
    re.IGNORECASE,
)
"""Words before the statement itself ("Sure, you ran ...")."""


def _lower(word: str) -> str:
    return word.lower().replace("\u2019", "'")


def _verbish(word: str) -> bool:
    """A finite verb form we can tell without a dictionary."""
    w = _lower(word)
    return (
        w in _AUX
        or w in _IRREGULAR_PAST
        or (len(w) > 3 and w.endswith("ed"))
        or (len(w) > 2 and w.endswith("s") and not w.endswith("ss"))
        or w.endswith("n't")
    )


def _verb_after(tokens: list[str], i: int, *, any_word: bool) -> bool:
    """A finite verb follows position ``i`` (adverbs skipped); ``any_word``: a base form too."""
    j = i + 1
    while j < len(tokens) and _ADVERB.match(tokens[j]):
        j += 1
    if j >= len(tokens):
        return False
    w = _lower(tokens[j])
    if w in _ADVICE or not w[0].isalpha():
        return False
    if w in ("have", "has", "need", "needs") and j + 1 < len(tokens) and tokens[j + 1] == "to":
        return False  # "you have to ...": advice
    if any_word:
        return w not in _FUNCTION
    return _verbish(w)


def _verb_ahead(words: list[str]) -> bool:
    """A finite verb among ``words`` (a noun phrase's end), before any advice modal."""
    for t in words:
        if not t[0].isalpha():
            return False
        if _lower(t) in _ADVICE:
            return False
        if _verbish(t):
            return True
    return False


def _subject_position(tokens: list[str], i: int) -> bool:
    """Token ``i`` starts a clause, not an object ("let you know", "to your list")."""
    if i == 0:
        return True
    prev = _lower(tokens[i - 1])
    if not prev[0].isalpha() or _TIME.fullmatch(prev):  # "On Monday you ran"
        return True
    return (
        prev not in _BEFORE_OBJECT
        and prev not in _CONDITIONAL
        and (prev in _FUNCTION or prev in ("said", "says", "see", "know", "noticed", "found"))
    )


_CONTRACTED = _words(
    "you've you're you'll you'd we've we're they're they've she's he's they'll she'll he'll"
)


def _after(tokens: list[str], i: int) -> str:
    return _lower(tokens[i + 1]) if i + 1 < len(tokens) else ""


def _person_subject(tokens: list[str], i: int) -> bool:
    """Token ``i`` is "you", "your ...", "we", "he", "she" or "they" with a finite verb."""
    w = _lower(tokens[i])
    if w in _CONTRACTED:
        return _after(tokens, i) not in ("welcome", "better", "like")
    if w == "your":
        return _verb_ahead(tokens[i + 2 : i + 7])  # "Your sister('s birthday) is ..."
    if w not in ("you", "we", "he", "she", "they"):
        return False
    if i + 2 < len(tokens) and _after(tokens, i) == "and":  # "you and Ana went"
        i += 2
    return _verb_after(tokens, i, any_word=True)


def _named_subject(tokens: list[str], i: int, names: Collection[str] | None) -> bool:
    """Token ``i`` starts a name ("Ana", "Ana Silva", "Ana's dog", "Ana and Rui") with a verb.

    With ``names`` (lower-cased, what the user's memory knows), only those count: "Slack
    wants *this*" says nothing about the user's life.
    """
    tok = tokens[i]
    if not tok[0].isupper() or tok in _NOT_NAMES:
        return False
    if names is not None and _lower(tok).removesuffix("'s") not in names:
        return False
    if _lower(tok).endswith("'s"):  # "Ana's dog is", or "Ana's at work"
        return _verb_ahead(tokens[i + 1 : i + 6]) or _after(tokens, i) in _FUNCTION
    while i + 1 < len(tokens) and tokens[i + 1][0].isupper():  # "Ana Silva", "New York"
        i += 1
    if i + 2 < len(tokens) and _after(tokens, i) == "and":
        return _verb_after(tokens, i + 2, any_word=True)
    return _verb_after(tokens, i, any_word=False)


def _clause_claim(tokens: list[str], names: Collection[str] | None) -> bool:
    """Some subject from the user's life, in subject position, with a finite verb."""
    return any(
        _subject_position(tokens, i)
        and (_person_subject(tokens, i) or _named_subject(tokens, i, names))
        for i in range(len(tokens))
    )


def is_claim(sentence: str, names: Collection[str] | None = None) -> bool:
    """A statement about the user's life, their people, places or times (see the module doc).

    ``names``: the people and places the user's memory knows (lower-cased); a name as the
    subject makes a claim only when it is one of them. None: any capitalised name does.
    """
    text = _OPENER.sub("", sentence.strip())
    if not text or text.rstrip().endswith("?") or _UNKNOWN.search(text):
        return False
    if _NOT_STATEMENT.match(text) or _HEDGE.search(text):
        return False
    if _REPORTING.match(text):
        return True
    tokens = _TOKEN.findall(text)
    if _clause_claim(tokens, names):
        return True
    # "The appointment is on Friday", "It was three days ago": a time of the user's life
    head = [_lower(t) for t in tokens[:5]]
    return bool(
        _TIME.search(text)
        and head
        and head[0] in ("it", "that", "this", "there", "the", "it's", "that's", "there's")
        and (head[0].endswith("'s") or _verb_ahead(tokens[1:5]))
    )
