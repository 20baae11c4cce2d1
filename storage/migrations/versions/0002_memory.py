"""memory: episodes, search index, fact extraction state

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
