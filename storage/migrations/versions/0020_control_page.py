"""control page: every process's heartbeat row, its newest log lines, and job run history (#31)

The owner's page shows every process of a deployment, the leader, a live log tail and the
scheduled jobs' recent runs, whichever process serves the page. Nothing here is a user's.

Revision ID: 0020_control_page
Revises: 0019_file_store
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

from storage.models._types import UTCDateTime

revision = "0020_control_page"
down_revision = "0019_file_store"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "lifebotprocess",
        sa.Column("id", _str(), nullable=False),
        sa.Column("host", _str(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("command", _str(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=False),
        sa.Column("stopped_at", UTCDateTime(), nullable=True),
        sa.Column("channels", _str(), nullable=False),
        sa.Column("web", _str(), nullable=False),
        sa.Column("jobs_enabled", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "processlog",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("process_id", _str(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("level", _str(), nullable=False),
        sa.Column("logger", _str(), nullable=False),
        sa.Column("text", _str(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_processlog_process_seq", "processlog", ["process_id", "seq"], unique=True)
    op.create_table(
        "jobrun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", _str(), nullable=False),
        sa.Column("process_id", _str(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("result", _str(), nullable=False),
        sa.Column("error", _str(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_jobrun_job_started", "jobrun", ["job_id", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_jobrun_job_started", table_name="jobrun")
    op.drop_table("jobrun")
    op.drop_index("ix_processlog_process_seq", table_name="processlog")
    op.drop_table("processlog")
    op.drop_table("lifebotprocess")
