"""One user's contacts."""

from __future__ import annotations

from typing import Any

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Contact
from storage.models.people import contact_name_key
from storage.repos._upsert import add_unless_taken


class ContactRepo:
    """Adds, lists and removes contacts, always for one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(
        self,
        user_id: int,
        name: str,
        *,
        aliases: str | None = None,
        relationship: str | None = None,
        reach: str | None = None,
    ) -> Contact:
        """Create a contact (or update the given fields of the one with this name)."""
        contact, _ = await self.put(
            user_id, name, aliases=aliases, relationship=relationship, reach=reach
        )
        return contact

    async def put(
        self,
        user_id: int,
        name: str,
        *,
        aliases: str | None = None,
        relationship: str | None = None,
        reach: str | None = None,
    ) -> tuple[Contact, bool]:
        """Create a contact, or update the one with this name; True when it was created.

        Adding someone again changes only the fields given: None leaves a field as it is (a
        new contact gets it empty), so "Ana, and here is her email" keeps her other names.
        The name matches by its key (any case, accents however typed: ``contact_name_key``),
        as a rename's clash check does, and keeps its spelling. Two puts of one name at once
        do what they would one after the other: the unique key lets one insert; the other's
        insert is rolled back to a savepoint and it updates the contact the first made.
        """
        given = {"aliases": aliases, "relationship": relationship, "reach": reach}
        found = await self._named(user_id, name)
        if found is None:
            contact = Contact(user_id=user_id, name=name)
            _fill(contact, given)
            refused = await add_unless_taken(self.s, contact)
            if refused is None:
                return contact, True
            found = await self._named(user_id, name)  # made by another request meanwhile
            if found is None:
                raise refused
        _fill(found, given)
        self.s.add(found)
        await self.s.flush()
        return found, False

    async def _named(self, user_id: int, name: str) -> Contact | None:
        """The user's contact with this name's key (in any case, however it is written)."""
        q = select(Contact).where(
            Contact.user_id == user_id, Contact.name_key == contact_name_key(name)
        )
        return (await self.s.exec(q)).first()

    async def every(self, user_id: int) -> list[Contact]:
        """The user's contacts by name."""
        q = select(Contact).where(Contact.user_id == user_id).order_by(col(Contact.name))
        return list((await self.s.exec(q)).all())

    async def remove(self, user_id: int, contact_id: int) -> Contact | None:
        """Delete one of the user's contacts; the row, or None when it is not theirs."""
        contact = (
            await self.s.exec(
                select(Contact).where(Contact.user_id == user_id, Contact.id == contact_id)
            )
        ).first()
        if contact is not None:
            await self.s.delete(contact)
        return contact

    async def get(self, user_id: int, contact_id: int) -> Contact | None:
        """One of the user's contacts (None when it is not theirs)."""
        q = select(Contact).where(Contact.user_id == user_id, Contact.id == contact_id)
        return (await self.s.exec(q)).first()

    async def change(self, user_id: int, contact_id: int, **fields: str | None) -> Contact | None:
        """Set the given fields (None leaves one as it is); None when the contact is not theirs.

        Raises ValueError when the new name is another of the user's contacts (by its key),
        also when another rename took it meanwhile (the unique key decides; this one is
        rolled back).
        """
        contact = await self.get(user_id, contact_id)
        if contact is None:
            return None
        name = fields.get("name")
        if name is not None and contact_name_key(name) != contact_name_key(contact.name):
            taken = await self._named(user_id, name)
            if taken is not None:
                raise ValueError(f"You already have a contact called {taken.name}.")
        for key in ("name", "aliases", "relationship", "reach"):
            value = fields.get(key)
            if value is not None:
                setattr(contact, key, value.strip())
        refused = await add_unless_taken(self.s, contact)  # another rename may take the name
        if refused is not None:  # the contact's fields are expired now: not read again
            raise ValueError(
                f"You already have a contact called {(name or '').strip()}."
            ) from refused
        return contact


def _fill(contact: Contact, given: dict[str, str | None]) -> None:
    """Set the fields given (None leaves one as it is)."""
    for key, value in given.items():
        if value is not None:
            setattr(contact, key, value)


def settle_twin_contacts(data: dict[str, list[dict[str, Any]]]) -> int:
    """In an export's rows, merge each later contact named as an earlier one into it.

    The database keeps one contact per user and name key (``contact_name_key``, migrations
    0025 and 0028); older versions could store "Anna" and "anna" together (requests at once;
    on SQLite "Ângela" and "ângela" until 0028), and their exports would be refused whole. As
    the upgrade merges a database's twins: the first keeps its spelling and gains what only a
    twin knew (other names; a relationship or way to reach them it lacks, after "; "); the
    twin goes. Every contact kept gets its name's key, made here: an export older than 0028
    has none, and one it holds may not be this version's. Returns how many twins were merged.
    """
    first: dict[tuple[str, str], dict[str, Any]] = {}
    kept: list[dict[str, Any]] = []
    for row in data.get("contact") or []:
        row["name_key"] = contact_name_key(str(row.get("name") or ""))
        key = (str(row.get("user_id")), row["name_key"])
        into = first.get(key)
        if into is None:
            first[key] = row
            kept.append(row)
            continue
        for field, sep in (("aliases", ", "), ("relationship", "; "), ("reach", "; ")):
            into[field] = _joined(str(into.get(field) or ""), str(row.get(field) or ""), sep)
    merged = len(data.get("contact") or []) - len(kept)
    if merged:
        data["contact"] = kept
    return merged


def _joined(kept: str, twin: str, sep: str) -> str:
    """``kept`` with each of ``twin``'s parts (split on ``sep``) it lacks, in any case."""
    parts = [p.strip() for p in kept.split(sep.strip()) if p.strip()]
    for part in (p.strip() for p in twin.split(sep.strip())):
        if part and part.lower() not in {p.lower() for p in parts}:
            parts.append(part)
    return sep.join(parts)
