"""Web tables: one-time sign-in links, browser sessions, API tokens and calendar feed tokens.

Every secret is stored only as a SHA-256 hash: the value is shown to the person once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class WebLoginLink(SQLModel, table=True):
    """A one-time sign-in link sent to a user in a private chat."""

    __table_args__ = (UniqueConstraint("token_hash", name="uq_webloginlink_token"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    token_hash: str
    """SHA-256 of the link's secret."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    used_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    """Set when the link signed someone in: it never works twice."""


class WebSession(SQLModel, table=True):
    """A signed-in browser."""

    __table_args__ = (UniqueConstraint("token_hash", name="uq_websession_token"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    token_hash: str
    """SHA-256 of the session cookie's secret."""
    csrf: str
    """The token every form of this session must carry."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    revoked_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    flash: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    """What the last form post said, shown once by the next page (never put in a URL)."""


class ApiToken(SQLModel, table=True):
    """A personal token for the REST API (``Authorization: Bearer ...``)."""

    __table_args__ = (UniqueConstraint("token_hash", name="uq_apitoken_token"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    name: str = ""
    """What the person called it (``phone``, ``scripts``)."""
    token_hash: str
    hint: str = ""
    """The token's first characters, so a person can tell tokens apart."""
    scope: str = "read"
    """``read`` (look only: GET and MCP read tools) or ``write`` (may also change things)."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    last_used_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    revoked_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )


class IcsToken(SQLModel, table=True):
    """The secret in a user's calendar subscription URL (one active per user)."""

    __table_args__ = (UniqueConstraint("token_hash", name="uq_icstoken_token"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    token_hash: str
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
    revoked_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )


class ServerKey(SQLModel, table=True):
    """A key lifebot generated for itself, shared by every process on this database.

    The web session key lives here (unless LIFEBOT_WEB_SECRET is set), so a browser signed in
    through one ``serve`` process is signed in on every other one. No person's data: never
    exported, and kept by a database backup like every table.
    """

    name: str = Field(primary_key=True)
    """What the key is for (``web_session``)."""
    value: str
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )
