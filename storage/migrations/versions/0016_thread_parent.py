"""messages: found by their channel id (a thread sees the message it hangs from) and read
back in the order stored (#19)

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
    op.create_index("ix_message_conv_id", "message", ["conversation_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_message_conv_id", table_name="message")
    op.drop_index("ix_message_external", table_name="message")
