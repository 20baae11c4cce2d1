"""inboxitem.taken_by: the process holding an album's item, so a dead one's are taken at once

On PostgreSQL a process took over an item only once nobody had taken it on for a minute: a
lone ``serve`` killed in an album's second and started again answered the album a minute
late. Each item now names its process; once that process's heartbeat (``lifebotprocess``)
says it stopped or has gone silent, another takes the item over at once.

Revision ID: 0029_inbox_holder
Revises: 0028_contact_name_key
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0029_inbox_holder"
down_revision = "0028_contact_name_key"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "inboxitem", sa.Column("taken_by", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("inboxitem") as batch:
        batch.drop_column("taken_by")
