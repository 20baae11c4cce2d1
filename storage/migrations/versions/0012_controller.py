"""controller: contacts, people as records (issue 19)

Revision ID: 0012_controller
Revises: 0011_voice
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0012_controller"
down_revision = "0011_voice"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "contact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", _str(), nullable=False),
        sa.Column("aliases", _str(), nullable=False),
        sa.Column("relationship", _str(), nullable=False),
        sa.Column("reach", _str(), nullable=False),
        sa.Column("created_at", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "name", name="uq_contact_user_name"),
    )
    with op.batch_alter_table("contact", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_contact_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("contact", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_contact_user_id"))
    op.drop_table("contact")
