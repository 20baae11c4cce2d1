"""voice: a per-user setting for spoken answers on Telegram (issue 23)

Revision ID: 0011_voice
Revises: 0010_senses
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0011_voice"
down_revision = "0010_senses"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("voice_replies", _str(), nullable=False, server_default="off")
        )


def downgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_column("voice_replies")
