"""People as records (issue 19): a user's contacts, with the other names they go by."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class Contact(SQLModel, table=True):
    """A person the user knows: "Ana" in a message resolves to one of these.

    One per user and name in any case (migration 0025), as every lookup matches names: "Anna"
    and "anna" made at once were two, and every later "Anna" fitted both.
    """

    __table_args__ = (
        UniqueConstraint("user_id", "name", name="uq_contact_user_name"),
        Index("ux_contact_user_folded_name", "user_id", text("lower(name)"), unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    name: str
    """The full name, as the user wants it shown ("Ana Silva")."""
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
