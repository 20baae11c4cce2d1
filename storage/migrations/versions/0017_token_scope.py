"""apitoken: a scope per personal API token, read or write (#32)

A token is read-only unless it was made with the write scope (MCP clients and scripts that
only look). Tokens made before this revision could already change things: they keep that
(scope ``write``); new rows default to ``read``.

Revision ID: 0017_token_scope
Revises: 0016_thread_parent
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0017_token_scope"
down_revision = "0016_thread_parent"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("apitoken", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scope", _str(), nullable=False, server_default="read"))
    op.execute("UPDATE apitoken SET scope = 'write'")


def downgrade() -> None:
    with op.batch_alter_table("apitoken", schema=None) as batch_op:
        batch_op.drop_column("scope")
