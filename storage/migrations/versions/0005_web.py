"""web: sign-in links, browser sessions, API tokens, calendar feed tokens

Revision ID: 0005_web
Revises: 0004
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0005_web"
down_revision = "0004"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString
_dt = storage.models.UTCDateTime


def _user_table(name: str, *columns: sa.Column, unique_name: str) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", _str(), nullable=False),
        *columns,
        sa.Column("created_at", _dt(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash", name=unique_name),
    )
    with op.batch_alter_table(name, schema=None) as batch_op:
        batch_op.create_index(batch_op.f(f"ix_{name}_user_id"), ["user_id"], unique=False)


def upgrade() -> None:
    _user_table(
        "webloginlink",
        sa.Column("expires_at", _dt(), nullable=False),
        sa.Column("used_at", _dt(), nullable=True),
        unique_name="uq_webloginlink_token",
    )
    _user_table(
        "websession",
        sa.Column("csrf", _str(), nullable=False),
        sa.Column("expires_at", _dt(), nullable=False),
        sa.Column("revoked_at", _dt(), nullable=True),
        unique_name="uq_websession_token",
    )
    _user_table(
        "apitoken",
        sa.Column("name", _str(), nullable=False),
        sa.Column("hint", _str(), nullable=False),
        sa.Column("last_used_at", _dt(), nullable=True),
        sa.Column("revoked_at", _dt(), nullable=True),
        unique_name="uq_apitoken_token",
    )
    _user_table(
        "icstoken",
        sa.Column("revoked_at", _dt(), nullable=True),
        unique_name="uq_icstoken_token",
    )


def downgrade() -> None:
    for name in ("icstoken", "apitoken", "websession", "webloginlink"):
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.drop_index(batch_op.f(f"ix_{name}_user_id"))
        op.drop_table(name)
