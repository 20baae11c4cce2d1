"""calendar: the user's own calendars (ICS feeds, CalDAV), all-day events, date order (#16)

Revision ID: 0013_calendar
Revises: 0012_controller
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0013_calendar"
down_revision = "0012_controller"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    # Plain ADD COLUMN and CREATE INDEX work on SQLite and PostgreSQL alike; batch mode would
    # reflect (and on SQLite copy) the tables for nothing.
    op.add_column("user", sa.Column("date_order", _str(), nullable=True))
    op.add_column(
        "calendarevent",
        sa.Column("all_day", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index(
        "ix_calendarevent_user_source", "calendarevent", ["user_id", "source"], unique=False
    )
    op.create_table(
        "calendarsource",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("kind", _str(), nullable=False),
        sa.Column("name", _str(), nullable=False),
        sa.Column("url", _str(), nullable=False),
        sa.Column("username", _str(), nullable=True),
        sa.Column("secret", _str(), nullable=True),
        sa.Column("last_synced_at", _dt(), nullable=True),
        sa.Column("last_error", _str(), nullable=True),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("created_at", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_calendarsource_user_id", "calendarsource", ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("calendarsource", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_calendarsource_user_id"))
    op.drop_table("calendarsource")
    with op.batch_alter_table("calendarevent", schema=None) as batch_op:
        batch_op.drop_index("ix_calendarevent_user_source")
        batch_op.drop_column("all_day")
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_column("date_order")
