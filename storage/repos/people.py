"""One user's contacts."""

from __future__ import annotations

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Contact
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
        The name matches in any case, as a rename's clash check does, and keeps its spelling.
        Two puts of one name at once do what they would one after the other: the unique
        name lets one insert; the other's insert is rolled back to a savepoint and it
        updates the contact the first made.
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
        """The user's contact with this name, in any case."""
        want = name.lower()
        return next((c for c in await self.every(user_id) if c.name.lower() == want), None)

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

        Raises ValueError when the new name is another of the user's contacts, also when
        another rename took it meanwhile (the unique name decides; this one is rolled back).
        """
        contact = await self.get(user_id, contact_id)
        if contact is None:
            return None
        name = fields.get("name")
        if name is not None and name.lower() != contact.name.lower():
            taken = [c for c in await self.every(user_id) if c.name.lower() == name.lower()]
            if taken:
                raise ValueError(f"You already have a contact called {taken[0].name}.")
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
