"""files: the file store's PostgreSQL backend, so every process on every host reads every
stored file (#28); on SQLite the store is a folder and these tables stay empty

Revision ID: 0019_file_store
Revises: 0018_web_flash
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0019_file_store"
down_revision = "0018_web_flash"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "storedfile",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", _str(), nullable=False),
        sa.Column("key", _str(), nullable=False),
        sa.Column("owner", sa.Integer(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("modified_at", _dt(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("kind", "key", name="uq_storedfile_kind_key"),
    )
    with op.batch_alter_table("storedfile", schema=None) as batch_op:
        batch_op.create_index("ix_storedfile_owner", ["kind", "owner"], unique=False)
    op.create_table(
        "storedfilechunk",
        sa.Column("file_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["file_id"], ["storedfile.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("file_id", "seq"),
    )


def downgrade() -> None:
    op.drop_table("storedfilechunk")
    with op.batch_alter_table("storedfile", schema=None) as batch_op:
        batch_op.drop_index("ix_storedfile_owner")
    op.drop_table("storedfile")
