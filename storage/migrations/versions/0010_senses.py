"""senses: web search use per day, meeting transcript jobs, document chunks (issue 16)

Revision ID: 0010_senses
Revises: 0009_location
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0010_senses"
down_revision = "0009_location"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "usagecount",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("what", _str(), nullable=False),
        sa.Column("day", _str(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "what", "day", name="uq_usagecount_day"),
    )
    op.create_table(
        "ingestjob",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("meeting_key", _str(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("status", _str(), nullable=False),
        sa.Column("due_at", _dt(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", _str(), nullable=True),
        sa.Column("episode_id", sa.Integer(), nullable=True),
        sa.Column("created_at", _dt(), nullable=False),
        sa.Column("updated_at", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("ingestjob", schema=None) as batch_op:
        batch_op.create_index("ix_ingestjob_due", ["status", "due_at"], unique=False)
        batch_op.create_index("ix_ingestjob_meeting", ["user_id", "meeting_key"], unique=False)

    op.create_table(
        "documentchunk",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("name", _str(), nullable=False),
        sa.Column("page", sa.Integer(), nullable=False),
        sa.Column("text", _str(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("documentchunk", schema=None) as batch_op:
        batch_op.create_index("ix_documentchunk_message", ["message_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("documentchunk", schema=None) as batch_op:
        batch_op.drop_index("ix_documentchunk_message")
    op.drop_table("documentchunk")
    with op.batch_alter_table("ingestjob", schema=None) as batch_op:
        batch_op.drop_index("ix_ingestjob_meeting")
        batch_op.drop_index("ix_ingestjob_due")
    op.drop_table("ingestjob")
    op.drop_table("usagecount")
