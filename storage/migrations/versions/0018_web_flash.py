"""websession.flash: what a form post said waits in the session for the next page (#29)

Form results used to travel in the redirect's query string (``/facts?note=Forgotten: ...``),
so personal words landed in browser history and proxy logs.

Revision ID: 0018_web_flash
Revises: 0017_token_scope
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_web_flash"
down_revision = "0017_token_scope"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("websession", sa.Column("flash", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("websession", "flash")
