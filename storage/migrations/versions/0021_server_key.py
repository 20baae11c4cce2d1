"""serverkey: keys lifebot generates for itself, shared by every process on the database (#28)

The web session key was a file in each process's data folder, so a browser signed in through
one ``serve`` process was refused by the others unless LIFEBOT_WEB_SECRET was set.

Revision ID: 0021_server_key
Revises: 0020_control_page
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0021_server_key"
down_revision = "0020_control_page"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "serverkey",
        sa.Column("name", _str(), nullable=False),
        sa.Column("value", _str(), nullable=False),
        sa.Column("created_at", _dt(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("serverkey")
