"""threads: a title and a running summary for each conversation; reminders' place and people (#19)

Revision ID: 0014_threads
Revises: 0013_calendar
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0014_threads"
down_revision = "0013_calendar"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    # Plain ADD COLUMN works on SQLite and PostgreSQL alike.
    op.add_column("conversation", sa.Column("title", _str(), nullable=True))
    op.add_column("conversation", sa.Column("summary", _str(), nullable=True))
    op.add_column("conversation", sa.Column("summary_through", sa.Integer(), nullable=True))
    # Reminders name places and people too, like calendar events.
    op.add_column("reminder", sa.Column("place", _str(), nullable=True))
    op.add_column("reminder", sa.Column("people", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reminder") as batch:
        batch.drop_column("people")
        batch.drop_column("place")
    with op.batch_alter_table("conversation") as batch:
        batch.drop_column("summary_through")
        batch.drop_column("summary")
        batch.drop_column("title")
