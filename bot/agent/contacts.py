"""The people a user keeps (the people feature's service): what the pages and the API change.

The chat reads contacts through ``bot.agent.people`` (resolving names before a search); the
Contacts page and ``/api/v1/contacts`` list, add, change and delete them through this one
service, each call its own transaction and scoped to one user.
"""

from __future__ import annotations

from storage.db import Database
from storage.models import Contact
from storage.repos.people import ContactRepo

LIMITS = {"name": 80, "aliases": 200, "relationship": 60, "reach": 200}
"""The most characters each field of a contact holds, on every path (chat, page, API)."""
_SAYS = {
    "name": "A name is",
    "aliases": "Other names are, together,",
    "relationship": "A relationship is",
    "reach": "How to reach them is",
}


def too_long(**fields: str | None) -> str | None:
    """Plain words for the first field longer than its limit; None when every one fits.

    Other names count as written, comma separated. A field not given (None) fits.
    """
    for key, value in fields.items():
        if value is not None and len(value) > LIMITS[key]:
            return f"{_SAYS[key]} at most {LIMITS[key]} characters."
    return None


class Contacts:
    """A user's contacts, each call scoped to that user (another user's id finds nothing)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def every(self, user_id: int) -> list[Contact]:
        """The user's contacts, by name."""
        async with self.db.session() as s:
            return await ContactRepo(s).every(user_id)

    async def put(
        self,
        user_id: int,
        name: str,
        *,
        aliases: str | None = None,
        relationship: str | None = None,
        reach: str | None = None,
    ) -> tuple[Contact, bool]:
        """Add a contact, or update the one with this name; True when it was made.

        Only the fields given change on an existing contact (None leaves a field as it is).
        """
        async with self.db.session() as s:
            return await ContactRepo(s).put(
                user_id, name, aliases=aliases, relationship=relationship, reach=reach
            )

    async def change(self, user_id: int, contact_id: int, **fields: str | None) -> Contact | None:
        """Set the given fields; None when it is not the user's contact.

        Raises ValueError when the new name is another of the user's contacts.
        """
        async with self.db.session() as s:
            return await ContactRepo(s).change(user_id, contact_id, **fields)

    async def remove(self, user_id: int, contact_id: int) -> Contact | None:
        """Delete one of the user's contacts; the row, or None when it is not theirs."""
        async with self.db.session() as s:
            return await ContactRepo(s).remove(user_id, contact_id)
