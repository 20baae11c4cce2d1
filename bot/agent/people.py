"""People and places before searching: "Ana" resolves to one contact, "Jordan's" to a place.

Deterministic, before the model sees the message: every contact's name and aliases and
every place's name and aliases are matched as whole words. A name that fits one record is
written into the prompt as resolved; a name that fits several (two contacts called Ana) and
is not settled by a full name in the message becomes a question back with a button per
person, asked by the controller without a model call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlmodel import select

from bot.agent.ask import Ask
from bot.feature import Access, Feature, Route
from storage.db import Database
from storage.models import Contact, Place
from storage.repos.people import ContactRepo, settle_twin_contacts


def _mentions(name: str, text: str) -> bool:
    return bool(re.search(rf"(?<!\w){re.escape(name.strip())}(?!\w)", text, re.IGNORECASE))


def describe(contact: Contact) -> str:
    """A contact on one line: name, relationship, other names, how to reach them."""
    parts = [contact.name]
    if contact.relationship:
        parts.append(contact.relationship)
    others = [a.strip() for a in contact.aliases.split(",") if a.strip()]
    if others:
        parts.append("also called " + ", ".join(others))
    if contact.reach:
        parts.append(f"reach: {contact.reach}")
    return " · ".join(parts)


@dataclass(slots=True)
class Resolution:
    """Who and where a message names, as far as the user's records tell."""

    lines: list[str] = field(default_factory=list)
    """Resolved mentions, one per line, for the prompt."""
    ask: Ask | None = None
    """A question back when a name fits several contacts."""
    people: list[str] = field(default_factory=list)
    """Full names of the resolved contacts (what searches should look for)."""


def resolve(text: str, contacts: list[Contact], places: list[Place]) -> Resolution:
    """Match the message's words against contacts and places."""
    out = Resolution()
    by_term: dict[str, list[Contact]] = {}
    for contact in contacts:
        for name in contact.names():
            if _mentions(name, text):
                by_term.setdefault(name.strip().lower(), []).append(contact)
    settled = {c.id for c in contacts if _mentions(c.name, text)}  # full names are certain
    for term, found in sorted(by_term.items()):
        unique = {c.id: c for c in found}
        if len(unique) > 1 and not settled & set(unique):
            out.ask = out.ask or Ask(
                f"Which {term.title()}?", [c.name for c in unique.values()][:4]
            )
            continue
        pick = next((c for c in unique.values() if c.id in settled), next(iter(unique.values())))
        line = f'"{term}" is {describe(pick)}'
        if line not in out.lines:
            out.lines.append(line)
            out.people.append(pick.name)
    for place in places:
        names = [place.name, *(a for a in place.aliases.split(",") if a.strip())]
        hit = next((n for n in names if _mentions(n, text)), None)
        if hit is not None:
            out.lines.append(f'"{hit.strip()}" is the place {place.name}')
    return out


async def resolve_for(db: Database, user_id: int, text: str) -> Resolution:
    """Resolve ``text`` against this user's contacts and places."""
    async with db.session() as s:
        contacts = await ContactRepo(s).every(user_id)
        places = list((await s.exec(select(Place).where(Place.user_id == user_id))).all())
    if not contacts and not places:
        return Resolution()
    return resolve(text, contacts, places)


FEATURE = Feature(
    name="contacts",
    about="The people in the user's life: names, aliases, relationships and how to reach them.",
    tables=("contact",),
    commands=("contacts", "contact"),
    routes=(Route("/api/v1/contacts", Access.BEARER), Route("/contacts", Access.SESSION)),
    import_fixes=(settle_twin_contacts,),
)
"""Contacts' declaration (issue 28)."""
