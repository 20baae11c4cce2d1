"""People as records (issue 19): a user's contacts, with the other names they go by."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, UniqueConstraint, event
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


def contact_name_key(name: str) -> str:
    """What makes two contact names one: "Ângela" and "ÂNGELA " are both "ângela".

    So is "Ângela" typed as an A and a combining circumflex. Unicode's compatibility caseless
    match (NFKC after full case folding, so "ß" is "ss" and an accent typed as a separate mark
    is the accented letter), with runs of spaces as one and none at the ends. Computed here,
    not by the database: SQLite's lower() folds only ASCII, so "Ângela" and "ângela" were two
    there and one on PostgreSQL.
    """
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFD", name).casefold())
    return " ".join(unicodedata.normalize("NFKC", folded.casefold()).split())


class Contact(SQLModel, table=True):
    """A person the user knows: "Ana" in a message resolves to one of these.

    One per user and name key (``contact_name_key``, migration 0028), as every lookup matches
    names by it: "Anna" and "anna" made at once were two (0025 made that one on both
    databases), and on SQLite so were "Ângela" and "ângela"; every later name fitted both.
    """

    __table_args__ = (
        UniqueConstraint("user_id", "name", name="uq_contact_user_name"),
        Index("ux_contact_user_name_key", "user_id", "name_key", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    name: str
    """The full name, as the user wants it shown ("Ana Silva")."""
    name_key: str = Field(
        default="",
        sa_column_kwargs={
            "server_default": "",
            "info": {"computed_from": ("name", contact_name_key)},
        },
    )
    """``contact_name_key(name)``: set on every insert and update of the row (below)."""
    aliases: str = ""
    """Other names, comma separated (``Ana, Aninha``)."""
    relationship: str = ""
    """Who they are to the user ("sister", "colleague")."""
    reach: str = ""
    """How to reach them (a phone number, an address, a handle), as the user wrote it."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )

    def names(self) -> list[str]:
        """The full name and every alias, stripped, without blanks."""
        return [n for n in (self.name, *self.aliases.split(",")) if n.strip()]


@event.listens_for(Contact, "before_insert")
@event.listens_for(Contact, "before_update")
def _keep_name_key(_mapper: Any, _conn: Any, contact: Contact) -> None:
    """Every write of a contact through the ORM carries its name's key.

    An import inserts rows as they are: ``storage.repos.people.settle_twin_contacts`` keys them.
    """
    contact.name_key = contact_name_key(contact.name)
