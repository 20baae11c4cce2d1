"""pendant: devices, audio spool, sessions

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "device",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", storage.models.UTCDateTime(), nullable=True),
        sa.Column("revoked_at", storage.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uq_device_name"),
    )
    with op.batch_alter_table("device", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_device_user_id"), ["user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_device_token_hash"), ["token_hash"], unique=False)

    op.create_table(
        "devicesession",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("language", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("started_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("closed_at", storage.models.UTCDateTime(), nullable=True),
        sa.Column("vad_cursor", sa.BigInteger(), nullable=False),
        sa.Column("next_seq", sa.Integer(), nullable=False),
        sa.Column("anchors", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["device_id"], ["device.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("devicesession", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_devicesession_device_id"), ["device_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_devicesession_user_id"), ["user_id"], unique=False)

    op.create_table(
        "audiosegment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("start_sample", sa.BigInteger(), nullable=False),
        sa.Column("end_sample", sa.BigInteger(), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("text", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("spoken_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("transcribed_at", storage.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["devicesession.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id", "seq", name="uq_audiosegment_seq"),
    )
    with op.batch_alter_table("audiosegment", schema=None) as batch_op:
        batch_op.create_index("ix_audiosegment_status", ["status"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_audiosegment_session_id"), ["session_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("audiosegment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audiosegment_session_id"))
        batch_op.drop_index("ix_audiosegment_status")
    op.drop_table("audiosegment")
    with op.batch_alter_table("devicesession", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_devicesession_user_id"))
        batch_op.drop_index(batch_op.f("ix_devicesession_device_id"))
    op.drop_table("devicesession")
    with op.batch_alter_table("device", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_token_hash"))
        batch_op.drop_index(batch_op.f("ix_device_user_id"))
    op.drop_table("device")
