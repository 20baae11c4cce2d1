"""device: a name is unique among live pendants only, so a revoked one stays its owner's

Pendant names are one namespace (a name is the pendant's sender id). With the name unique over
every row, a revoked name taken by another user had to reuse the revoked row: it moved to the
new user, and the first owner's revoked pendant vanished from her list (her old sessions
pointing at his device). Now a name is unique among pendants that are not revoked.

Revision ID: 0022_device_live_name
Revises: 0021_server_key
"""

import sqlalchemy as sa
from alembic import op

revision = "0022_device_live_name"
down_revision = "0021_server_key"
branch_labels = None
depends_on = None

LIVE = sa.text("revoked_at IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("device", schema=None) as batch_op:
        batch_op.drop_constraint("uq_device_name", type_="unique")
    op.create_index(
        "ux_device_live_name",
        "device",
        ["name"],
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )


def downgrade() -> None:
    op.drop_index("ux_device_live_name", table_name="device")
    with op.batch_alter_table("device", schema=None) as batch_op:
        batch_op.create_unique_constraint("uq_device_name", ["name"])
