"""Alembic environment: runs on the connection lifebot hands it (see storage.db)."""

from alembic import context
from sqlmodel import SQLModel

import storage.models  # registers the tables on SQLModel.metadata

# Objects the database has on purpose but the models do not describe: full-text index
# tables and the tsvector column (storage/search), and APScheduler's own job table.
_UNMODELLED = ("memoryitem_fts", "apscheduler_jobs", "ix_apscheduler_jobs", "ix_memoryitem_tsv")


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    """Keep autogenerate from proposing to drop objects that are not modelled on purpose."""
    if reflected and compare_to is None:
        if name and name.startswith(_UNMODELLED):
            return False
        if type_ == "column" and name == "tsv":
            return False
    return True


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through storage.db.Database.migrate()")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    include_object=include_object,
)
with context.begin_transaction():
    context.run_migrations()
