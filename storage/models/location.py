"""Location tables (issue 24): raw points, named places, detected stays and the per-user switch.

Coordinates are WGS 84 degrees. Raw points are the ground truth for stays and are kept for a
retention period; stays are kept. Every row hangs off a user id.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime, utcnow


class LocationSetting(SQLModel, table=True):
    """Whether a user records location, and the hash of their phone-app token."""

    user_id: int = Field(foreign_key="user.id", primary_key=True)
    enabled: bool = False
    """Off until the user sends /location on."""
    enabled_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    """When recording was last turned on: points timed earlier are never stored."""
    token_hash: str | None = Field(default=None, index=True)
    """SHA-256 of the token OwnTracks / Overland send; None once revoked."""
    scan_at: str | None = None
    """Local ``HH:MM`` of the evening scan for proposals; None means 21:30."""
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class LocationPoint(SQLModel, table=True):
    """One position fix; a repeat of (user, time) is ignored."""

    __table_args__ = (
        UniqueConstraint("user_id", "ts", name="uq_locationpoint_user_ts"),
        Index("ix_locationpoint_user_ts", "user_id", "ts"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    ts: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    lat: float
    """Latitude in degrees."""
    lon: float
    """Longitude in degrees."""
    accuracy_m: float | None = None
    """Horizontal accuracy radius in metres, when the source gives one."""
    source: str = ""
    """``telegram``, ``owntracks`` or ``overland``."""


class Place(SQLModel, table=True):
    """A named place of one user: a centre, a radius and aliases."""

    __table_args__ = (UniqueConstraint("user_id", "name", name="uq_place_user_name"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    name: str
    lat: float
    """Latitude of the centre."""
    lon: float
    """Longitude of the centre."""
    radius_m: float = 100.0
    """How far from the centre a stay still counts as being here."""
    aliases: str = ""
    """Other names, comma separated (``work, office``)."""
    kind: str = "normal"
    """``normal``, ``home`` (home-like) or ``ignored``."""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False)
    )


class Stay(SQLModel, table=True):
    """A detected stay: the user was around (lat, lon) from ``start`` to ``end``."""

    __table_args__ = (Index("ix_stay_user_start", "user_id", "start"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id")
    start: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    end: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    lat: float
    """Latitude of the stay's centre (medoid of its fixes)."""
    lon: float
    """Longitude of the stay's centre."""
    place_id: int | None = Field(default=None, foreign_key="place.id")
    """The named place it matched, if any."""
    points: int = 0
    """How many fixes make it up."""
