"""location: points, places, stays and the per-user location switch (issue 24)

Revision ID: 0008_location
Revises: 0007_scale
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0008_location"
down_revision = "0007_scale"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "locationsetting",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("enabled_at", _dt(), nullable=True),
        sa.Column("token_hash", _str(), nullable=True),
        sa.Column("updated_at", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("user_id"),
    )
    with op.batch_alter_table("locationsetting", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_locationsetting_token_hash"), ["token_hash"], unique=False
        )
    op.create_table(
        "locationpoint",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("ts", _dt(), nullable=False),
        sa.Column("lat", sa.Float(), nullable=False),
        sa.Column("lon", sa.Float(), nullable=False),
        sa.Column("accuracy_m", sa.Float(), nullable=True),
        sa.Column("source", _str(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "ts", name="uq_locationpoint_user_ts"),
    )
    with op.batch_alter_table("locationpoint", schema=None) as batch_op:
        batch_op.create_index("ix_locationpoint_user_ts", ["user_id", "ts"], unique=False)
    op.create_table(
        "place",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", _str(), nullable=False),
        sa.Column("lat", sa.Float(), nullable=False),
        sa.Column("lon", sa.Float(), nullable=False),
        sa.Column("radius_m", sa.Float(), nullable=False),
        sa.Column("aliases", _str(), nullable=False),
        sa.Column("kind", _str(), nullable=False),
        sa.Column("created_at", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "name", name="uq_place_user_name"),
    )
    with op.batch_alter_table("place", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_place_user_id"), ["user_id"], unique=False)
    op.create_table(
        "stay",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("start", _dt(), nullable=False),
        sa.Column("end", _dt(), nullable=False),
        sa.Column("lat", sa.Float(), nullable=False),
        sa.Column("lon", sa.Float(), nullable=False),
        sa.Column("place_id", sa.Integer(), nullable=True),
        sa.Column("points", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["place_id"], ["place.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("stay", schema=None) as batch_op:
        batch_op.create_index("ix_stay_user_start", ["user_id", "start"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("stay", schema=None) as batch_op:
        batch_op.drop_index("ix_stay_user_start")
    op.drop_table("stay")
    with op.batch_alter_table("place", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_place_user_id"))
    op.drop_table("place")
    with op.batch_alter_table("locationpoint", schema=None) as batch_op:
        batch_op.drop_index("ix_locationpoint_user_ts")
    op.drop_table("locationpoint")
    with op.batch_alter_table("locationsetting", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_locationsetting_token_hash"))
    op.drop_table("locationsetting")
