"""What the owner's control page reads about lifebot's own processes (issue 31).

Every long-running process (``lifebot serve``, ``lifebot chat``) keeps a row of its own,
renewed by a heartbeat, and copies its newest log lines here, so a page served by any one
process can show every process of the deployment and what each has been logging. Nothing
here belongs to a user: no ``user_id``, never exported or deleted with a user.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index
from sqlmodel import Field, SQLModel

from storage.models._types import UTCDateTime


class LifebotProcess(SQLModel, table=True):
    """One running (or lately stopped) lifebot process, renewed by its heartbeat."""

    id: str = Field(primary_key=True)
    """``host:pid:random``: the same name the process holds the leader lease under."""
    host: str
    """The machine (or container) it runs on."""
    pid: int
    """Its process id on that host."""
    command: str = "serve"
    """What it was started as (``serve``, ``chat``)."""
    started_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    last_seen_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    """Its last heartbeat: a process not seen for a few heartbeats is gone or frozen."""
    stopped_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    """When it stopped cleanly (None while it runs, or when it died without a word)."""
    channels: str = ""
    """The chat channels it runs, comma separated."""
    web: str = ""
    """Where its web page listens (``127.0.0.1:8700``); empty when it serves none."""
    jobs_enabled: bool = True
    """It may run the scheduled jobs (LIFEBOT_JOBS_ENABLED)."""


class ProcessLog(SQLModel, table=True):
    """One log line of one process: each keeps only its newest few hundred here."""

    __table_args__ = (Index("ix_processlog_process_seq", "process_id", "seq", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    process_id: str
    """The ``LifebotProcess`` that wrote it."""
    seq: int
    """Its number in that process's own order (the tail is read in this order)."""
    at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    level: str
    logger: str
    text: str
    """The line, secrets already redacted (``bot.app.logsafe``) before it was kept."""


class JobRun(SQLModel, table=True):
    """One run of a scheduled job: the history behind ``JobState``'s last result."""

    __table_args__ = (Index("ix_jobrun_job_started", "job_id", "started_at"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str
    process_id: str
    """The leader that ran it."""
    started_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    seconds: float = 0.0
    """How long it took."""
    result: str = ""
    """Its summary (``fired 2``), cut to 500 characters."""
    error: str | None = None
    """Why it failed (None when it did not)."""
