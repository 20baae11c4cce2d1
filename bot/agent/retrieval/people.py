"""Who the user's memory knows: the names a question may filter on.

A capitalised word in a question is a person only when the user's memory knows someone by
that name: a contact (name or alias), someone who speaks in the user's conversations, or a
name in one of the user's facts ("My sister is Ana"). Everything else ("Biscuit", "Lisbon")
is searched as a word, never used to drop results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlmodel import select

from storage.db import Database
from storage.models import Place
from storage.repos.facts import FactRepo
from storage.repos.memory_index import OWN_SPEAKERS
from storage.repos.people import ContactRepo

_NAME = re.compile(r"\b[A-Z][a-z]+(?:-[A-Z][a-z]+)?\b")
_NOT_NAMES = frozenset(
    ["My", "Our", "His", "Her", "Their", "The", "A", "An", "I", "Is", "Are", "Was", "Were",
     "Has", "Have", "Had", "Never", "Always", "Do", "Don't"]
)  # fmt: skip


def names_in_text(text: str) -> set[str]:
    """Capitalised words of a fact that may be names (lower-cased)."""
    return {m.group(0).lower() for m in _NAME.finditer(text) if m.group(0) not in _NOT_NAMES}


async def known_people(
    db: Database,
    user_id: int,
    speakers: Iterable[str],
    *,
    places: bool = False,
    texts: Iterable[str] = (),
) -> frozenset[str]:
    """Lower-cased names the user's memory knows (contacts, ``speakers``, facts' names).

    ``places`` adds the user's named places; ``texts`` adds the capitalised words of other
    text the caller holds (this turn's tool results, for the check before answering).
    """
    out = {s.lower() for s in speakers if s.lower() not in OWN_SPEAKERS and s != "pendant"}
    async with db.session() as s:
        contacts = await ContactRepo(s).every(user_id)
        facts = await FactRepo(s).active(user_id)
        named = (
            (await s.exec(select(Place.name).where(Place.user_id == user_id))).all()
            if places
            else []
        )
    for c in contacts:
        out.update(part.lower() for part in re.split(r"[\s,]+", f"{c.name},{c.aliases}") if part)
    for text in (*(f.text for f in facts), *named, *texts):
        out.update(names_in_text(text))
    return frozenset(out)
