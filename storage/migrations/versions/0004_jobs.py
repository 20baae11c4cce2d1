"""jobs: user schedule settings, outbox, reminders, events, proposals

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("briefing_time", _str(), nullable=False, server_default="07:30")
        )
        batch_op.add_column(
            sa.Column("briefing_enabled", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch_op.add_column(
            sa.Column("briefing_set_at", storage.models.UTCDateTime(), nullable=True)
        )
        batch_op.add_column(sa.Column("quiet_start", _str(), nullable=True, server_default="22:00"))
        batch_op.add_column(sa.Column("quiet_end", _str(), nullable=True, server_default="07:00"))

    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.add_column(sa.Column("account", _str(), nullable=True))
        batch_op.add_column(sa.Column("claimed_at", storage.models.UTCDateTime(), nullable=True))
        batch_op.create_index("ix_delivery_status_due", ["status", "due_at"], unique=False)
        batch_op.create_index("ix_delivery_kind_due", ["kind", "due_at"], unique=False)

    op.create_table(
        "reminder",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("text", _str(), nullable=False),
        sa.Column("request", _str(), nullable=False),
        sa.Column("next_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("recurrence", sa.JSON(), nullable=True),
        sa.Column("timezone", _str(), nullable=False),
        sa.Column("status", _str(), nullable=False),
        sa.Column("fired", sa.Integer(), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reminder", schema=None) as batch_op:
        batch_op.create_index("ix_reminder_user_id", ["user_id"], unique=False)
        batch_op.create_index("ix_reminder_status_next", ["status", "next_at"], unique=False)

    op.create_table(
        "calendarevent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("uid", _str(), nullable=False),
        sa.Column("title", _str(), nullable=False),
        sa.Column("title_key", _str(), nullable=False),
        sa.Column("start_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("end_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("place", _str(), nullable=True),
        sa.Column("people", sa.JSON(), nullable=True),
        sa.Column("source", _str(), nullable=False),
        sa.Column("cancelled_at", storage.models.UTCDateTime(), nullable=True),
        sa.Column("created_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("updated_at", storage.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("calendarevent", schema=None) as batch_op:
        batch_op.create_index("ix_calendarevent_uid", ["uid"], unique=True)
        batch_op.create_index("ix_calendarevent_user_start", ["user_id", "start_at"], unique=False)

    op.create_table(
        "proposal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("title", _str(), nullable=False),
        sa.Column("title_key", _str(), nullable=False),
        sa.Column("start_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("end_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("place", _str(), nullable=True),
        sa.Column("people", sa.JSON(), nullable=True),
        sa.Column("source", _str(), nullable=False),
        sa.Column("source_message_id", sa.Integer(), nullable=True),
        sa.Column("status", _str(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=True),
        sa.Column("created_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("expires_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("answered_at", storage.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("proposal", schema=None) as batch_op:
        batch_op.create_index("ix_proposal_user_id", ["user_id"], unique=False)
        batch_op.create_index("ix_proposal_status_expires", ["status", "expires_at"], unique=False)

    op.create_table(
        "joblease",
        sa.Column("name", _str(), nullable=False),
        sa.Column("holder", _str(), nullable=False),
        sa.Column("expires_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("heartbeat_at", storage.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "jobstate",
        sa.Column("id", _str(), nullable=False),
        sa.Column("last_run_at", storage.models.UTCDateTime(), nullable=True),
        sa.Column("last_result", _str(), nullable=False),
        sa.Column("last_error", _str(), nullable=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("cursor", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    # APScheduler's own job store table, with the exact shape SQLAlchemyJobStore expects (it
    # would create it on start; owning it here keeps the schema under migrations).
    op.create_table(
        "apscheduler_jobs",
        sa.Column("id", sa.Unicode(191), nullable=False),
        sa.Column("next_run_time", sa.Float(25), nullable=True),
        sa.Column("job_state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_apscheduler_jobs_next_run_time", "apscheduler_jobs", ["next_run_time"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_apscheduler_jobs_next_run_time", table_name="apscheduler_jobs")
    op.drop_table("apscheduler_jobs")
    op.drop_table("jobstate")
    op.drop_table("joblease")
    with op.batch_alter_table("proposal", schema=None) as batch_op:
        batch_op.drop_index("ix_proposal_status_expires")
        batch_op.drop_index("ix_proposal_user_id")
    op.drop_table("proposal")
    with op.batch_alter_table("calendarevent", schema=None) as batch_op:
        batch_op.drop_index("ix_calendarevent_user_start")
        batch_op.drop_index("ix_calendarevent_uid")
    op.drop_table("calendarevent")
    with op.batch_alter_table("reminder", schema=None) as batch_op:
        batch_op.drop_index("ix_reminder_status_next")
        batch_op.drop_index("ix_reminder_user_id")
    op.drop_table("reminder")
    with op.batch_alter_table("delivery", schema=None) as batch_op:
        batch_op.drop_index("ix_delivery_kind_due")
        batch_op.drop_index("ix_delivery_status_due")
        batch_op.drop_column("claimed_at")
        batch_op.drop_column("account")
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_column("quiet_end")
        batch_op.drop_column("quiet_start")
        batch_op.drop_column("briefing_set_at")
        batch_op.drop_column("briefing_enabled")
        batch_op.drop_column("briefing_time")
