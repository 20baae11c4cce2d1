"""calendarsource: PostgreSQL indexes a calendar's address by its md5 (a long one gave 500s)

The first form of 0024 indexed (user_id, kind, url) itself. A PostgreSQL btree row holds about
2.7 kB, so linking a longer address (a CalDAV server's collection path can be any length)
failed with a server error, and a database already holding one could not be upgraded. 0024
now builds the index on md5(url) there; this makes a database upgraded by its first form the
same. SQLite has no such limit and keeps the address itself.

Revision ID: 0026_calendar_url_hash
Revises: 0025_contact_once
"""

import sqlalchemy as sa
from alembic import op

revision = "0026_calendar_url_hash"
down_revision = "0025_contact_once"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # Built again whichever form is there: the table holds a few rows per person.
    op.drop_index("ux_calendarsource_user_url", table_name="calendarsource")
    op.create_index(
        "ux_calendarsource_user_url",
        "calendarsource",
        ["user_id", "kind", sa.text("md5(url)")],
        unique=True,
    )


def downgrade() -> None:
    # The hashed index is what 0024 builds now: nothing to undo.
    pass
