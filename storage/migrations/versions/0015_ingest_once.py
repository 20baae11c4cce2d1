"""ingest: one pending meeting transcript job per meeting (#16)

Posts of one meeting arriving at the same instant could each queue a job (the check for a
pending one and the insert were two statements). A partial unique index makes the queueing
one upsert. Duplicates already queued are settled first: the newest stays pending.

Revision ID: 0015_ingest_once
Revises: 0014_threads
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_ingest_once"
down_revision = "0014_threads"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    # Older duplicates of a pending job lose to the newest post of their meeting.
    op.execute(
        "UPDATE ingestjob SET status = 'failed', "
        "last_error = 'replaced by a newer post of the same meeting' "
        "WHERE status = 'pending' AND id < ("
        "SELECT MAX(newer.id) FROM ingestjob AS newer WHERE newer.status = 'pending' "
        "AND newer.user_id = ingestjob.user_id AND newer.meeting_key = ingestjob.meeting_key)"
    )
    op.create_index(
        "ux_ingestjob_pending",
        "ingestjob",
        ["user_id", "meeting_key"],
        unique=True,
        sqlite_where=PENDING,
        postgresql_where=PENDING,
    )


def downgrade() -> None:
    op.drop_index("ux_ingestjob_pending", table_name="ingestjob")
