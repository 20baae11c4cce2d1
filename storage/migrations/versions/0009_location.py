"""location: the per-user scan time and questions waiting for an answer (issue 24)

Revision ID: 0009_location
Revises: 0008_location
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0009_location"
down_revision = "0008_location"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table("locationsetting", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scan_at", _str(), nullable=True))
    op.create_table(
        "pendinganswer",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("command", _str(), nullable=False),
        sa.Column("since", _dt(), nullable=False),
        sa.Column("until", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("user_id"),
    )


def downgrade() -> None:
    op.drop_table("pendinganswer")
    with op.batch_alter_table("locationsetting", schema=None) as batch_op:
        batch_op.drop_column("scan_at")
