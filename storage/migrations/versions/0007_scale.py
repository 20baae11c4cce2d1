"""scale-out: the leader lease's fencing token; bounded retries of episode summaries

Revision ID: 0007_scale
Revises: 0006_journal
"""

import sqlalchemy as sa
from alembic import op

import storage.models

revision = "0007_scale"
down_revision = "0006_journal"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("joblease", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("episode", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("summary_attempts", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("summary_retry_at", storage.models.UTCDateTime(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("episode", schema=None) as batch_op:
        batch_op.drop_column("summary_retry_at")
        batch_op.drop_column("summary_attempts")
    with op.batch_alter_table("joblease", schema=None) as batch_op:
        batch_op.drop_column("token")
