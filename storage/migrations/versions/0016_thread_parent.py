"""messages: found by their channel id, so a thread sees the message it hangs from (#19)

Revision ID: 0016_thread_parent
Revises: 0015_ingest_once
"""

from alembic import op

revision = "0016_thread_parent"
down_revision = "0015_ingest_once"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_message_external", "message", ["user_id", "external_id"])


def downgrade() -> None:
    op.drop_index("ix_message_external", table_name="message")
