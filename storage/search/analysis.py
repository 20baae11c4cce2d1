"""Text analysis for lexical search: lower-cased words, stop words out, Snowball stems.

The same function analyses stored text and questions, so a question word matches every
inflection of it ("adopted" finds "adoption agencies" through the stem "adopt").
``snowballstemmer`` runs the C Snowball engine from PyStemmer when it is installed (it is a
dependency): the same stems, about 25 times faster, which a cold search tokenising thousands
of messages notices.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import snowballstemmer

from storage.search.fulltext import STOPWORDS

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_LOCK = threading.Lock()
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=32_768)
def _stem(word: str) -> str:
    with _LOCK:  # the stemmer object keeps state between calls
        return str(_STEMMER.stemWord(word))


def stem(word: str) -> str:
    """The Snowball (Porter 2) stem of one lower-case word.

    Common words are cached (a few thousand cover most of any chat); numbers are their own
    stem and skip the cache, which they would otherwise fill with one-off entries (#22).
    """
    if word.isascii() and word.isdigit():
        return word
    return _stem(word)


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` with possessives cut ("Caroline's" -> "caroline")."""
    return [w.split("'")[0] for w in _WORD.findall(text.lower())]


FIRST_PERSON = frozenset(["i", "me", "my", "mine", "myself", "we", "us", "our", "ours"])
"""Words by which a speaker talks about themselves ("I", "my", "we", ...)."""


def self_words(text: str) -> int:
    """How many times ``text`` says "I", "my", "we" and the like (at most 255).

    What people tell about their own lives is said in the first person; a turn that only
    reacts or asks ("So cool! What about you?") says little of it.
    """
    return min(255, sum(1 for w in words(text) if w in FIRST_PERSON))


def asks(text: str) -> bool:
    """Whether ``text`` asks something (holds a question mark)."""
    return "?" in text or "\uff1f" in text  # also the full-width mark of CJK text


def analyse(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Stems of the content words of ``text``, in order, repeats kept (for term counts)."""
    return [stem(w) for w in words(text) if len(w) > 1 and w not in stopwords]
