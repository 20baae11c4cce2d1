"""Contacts from conversation: "my sister Ana's number is ..." becomes an offer to save Ana.

Deterministic (no model call): a few sentence shapes name a person with a relationship and a
way to reach them. The offer is kept on the user's stored message (its ``meta``, so a press
after a restart still works) and shown under the answer with Yes/No buttons; nothing is saved
until the user says yes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.agent.people import describe
from bot.messages import Button
from storage.db import Database
from storage.models import Contact
from storage.models.people import contact_name_key
from storage.repos.messages import MessageRepo
from storage.repos.people import ContactRepo

RELATIONS = (
    "sister|brother|mother|mom|mum|father|dad|wife|husband|partner|girlfriend|boyfriend|son|"
    "daughter|aunt|uncle|cousin|niece|nephew|grandmother|grandma|grandfather|grandpa|friend|"
    "best friend|colleague|coworker|boss|manager|neighbour|neighbor|doctor|dentist|"
    "physio|therapist|accountant|lawyer|landlord|flatmate|roommate"
)
_NAME = r"(?P<name>[A-Z][\w'-]+(?: [A-Z][\w'-]+)?)"
_REACH_KIND = r"(?:phone number|phone|number|mobile|cell|email|e-mail|address|handle)"
_WITH_REACH = re.compile(
    rf"\bmy (?P<rel>{RELATIONS}),? {_NAME}(?:'s|\u2019s) {_REACH_KIND} is (?P<reach>[^\n]+?)"
    r"\s*(?:[.!]\s|[.!]?$)"
)
# The relation word must end the clause: "Ana is my dentist." but not "Where is my dentist
# appointment?" (a question, and "dentist" there names the appointment, not a person).
_IS_MY = re.compile(rf"\b{_NAME} is my (?P<rel>{RELATIONS})(?=\s*(?:[.,;!]|$|\band\b))")
_NOT_NAMES = {
    *("He", "She", "It", "This", "That", "There", "My", "I", "Who", "What", "Whose"),
    *("Where", "When", "Why", "How", "Which", "Here", "Today", "Tomorrow", "Yesterday"),
}


@dataclass(frozen=True, slots=True)
class ContactOffer:
    """A person the user just described, not yet saved."""

    name: str
    relationship: str
    reach: str = ""

    def line(self) -> str:
        """The offer in the user's words."""
        parts = [self.name, self.relationship] + ([self.reach] if self.reach else [])
        return " · ".join(parts)


def spot_contact(text: str) -> ContactOffer | None:
    """The person a message describes ("my sister Ana's number is 555 0101"), if any."""
    found = _WITH_REACH.search(text)
    if found and found["name"] not in _NOT_NAMES:
        return ContactOffer(found["name"], found["rel"].lower(), found["reach"].strip(" .,"))
    found = _IS_MY.search(text)
    if found and found["name"] not in _NOT_NAMES:
        return ContactOffer(found["name"], found["rel"].lower())
    return None


def already_known(offer: ContactOffer, contacts: list[Contact]) -> bool:
    """The user already has this person with the same details (nothing to offer)."""
    name = contact_name_key(offer.name)
    for c in contacts:
        if name in {contact_name_key(n) for n in c.names()}:
            return (not offer.reach or offer.reach in c.reach) and (
                offer.relationship == c.relationship.lower()
            )
    return False


def offer_question(offer: ContactOffer) -> str:
    """The line under the answer asking to save the person."""
    return f"Shall I save {offer.name} as a contact? ({offer.line()})"


def offer_buttons(message_id: int) -> list[Button]:
    """Yes/No, each naming the stored message that holds the offer."""
    return [
        Button("Yes, save", f"/contact yes {message_id}", row=0),
        Button("No", f"/contact no {message_id}", row=0),
    ]


async def offer_for(db: Database, user_id: int, message_id: int, text: str) -> ContactOffer | None:
    """Spot a new person in ``text`` and keep the offer on the message; None if nothing new."""
    offer = spot_contact(text)
    if offer is None:
        return None
    async with db.session() as s:
        if already_known(offer, await ContactRepo(s).every(user_id)):
            return None
        row = await MessageRepo(s).get(user_id, message_id)
        if row is None:
            return None
        pending = {"name": offer.name, "relationship": offer.relationship, "reach": offer.reach}
        row.meta = {**(row.meta or {}), "contact_offer": pending}  # a new dict for JSON
        s.add(row)
    return offer


async def settle_offer(db: Database, user_id: int, message_id: int, *, yes: bool) -> str:
    """The user's Yes or No to an offer: save the contact (merging with one of that name)."""
    async with db.session() as s:
        row = await MessageRepo(s).get(user_id, message_id)
        meta = dict(row.meta or {}) if row is not None else {}
        pending = meta.get("contact_offer")
        if row is None or not isinstance(pending, dict):
            return "That offer is gone: nothing to save."
        if pending.get("settled"):
            return "You already answered that one."
        row.meta = {**meta, "contact_offer": {**pending, "settled": "yes" if yes else "no"}}
        s.add(row)
        if not yes:
            return f"Fine, I won't save {pending['name']}."
        repo = ContactRepo(s)
        key = contact_name_key(pending["name"])
        old = next((c for c in await repo.every(user_id) if c.name_key == key), None)
        saved = await repo.add(
            user_id,
            old.name if old else pending["name"],
            aliases=old.aliases if old else "",
            relationship=pending["relationship"] or (old.relationship if old else ""),
            reach=pending["reach"] or (old.reach if old else ""),
        )
        return f"Saved #{saved.id}: {describe(saved)}"
