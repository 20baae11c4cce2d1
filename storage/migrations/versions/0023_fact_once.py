"""fact: one live fact per user and words (concurrent adds stored it twice)

The check for a known fact and the insert were two statements, so the same words posted
several times at once (the API, MCP, chat) were each stored. A partial unique index on the
live facts (neither forgotten nor replaced) makes the database decide. Duplicates already
stored are settled first: the oldest stays, the others are marked replaced by it and leave
the search index.

Revision ID: 0023_fact_once
Revises: 0022_device_live_name
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_fact_once"
down_revision = "0022_device_live_name"
branch_labels = None
depends_on = None

LIVE = sa.text("forgotten_at IS NULL AND superseded_by IS NULL")


def upgrade() -> None:
    # Later twins of a live fact are marked replaced by the oldest one.
    op.execute(
        "UPDATE fact SET superseded_by = ("
        "SELECT MIN(twin.id) FROM fact AS twin WHERE twin.user_id = fact.user_id "
        "AND twin.text_hash = fact.text_hash "
        "AND twin.forgotten_at IS NULL AND twin.superseded_by IS NULL) "
        "WHERE forgotten_at IS NULL AND superseded_by IS NULL AND EXISTS ("
        "SELECT 1 FROM fact AS twin WHERE twin.user_id = fact.user_id "
        "AND twin.text_hash = fact.text_hash AND twin.id < fact.id "
        "AND twin.forgotten_at IS NULL AND twin.superseded_by IS NULL)"
    )
    # What FactKeeper does for a replaced fact: it is no longer searched.
    op.execute(
        "DELETE FROM memoryitem WHERE kind = 'fact' AND source_id IN "
        "(SELECT id FROM fact WHERE superseded_by IS NOT NULL)"
    )
    op.create_index(
        "ux_fact_live_words",
        "fact",
        ["user_id", "text_hash"],
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )


def downgrade() -> None:
    op.drop_index("ux_fact_live_words", table_name="fact")
