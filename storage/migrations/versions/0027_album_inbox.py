"""inboxitem: an album's photos, kept from the webhook's answer until the album is handled

A webhook answers each photo of a Telegram album at once (Telegram sends the next only
then); a process killed before the album was handled lost photos Telegram would not send
again. Each is now kept here before its answer, and taken up again at the next start.

Revision ID: 0027_album_inbox
Revises: 0026_calendar_url_hash
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

from storage.models._types import UTCDateTime

revision = "0027_album_inbox"
down_revision = "0026_calendar_url_hash"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "inboxitem",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", _str(), nullable=False),
        sa.Column("account", _str(), nullable=False),
        sa.Column("chat_id", _str(), nullable=False),
        sa.Column("external_id", _str(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        sa.Column("taken_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("channel", "account", "chat_id", "external_id", name="uq_inboxitem"),
    )


def downgrade() -> None:
    op.drop_table("inboxitem")
