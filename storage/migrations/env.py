"""Alembic environment: runs on the connection lifebot hands it (see storage.db)."""

from alembic import context
from sqlmodel import SQLModel

import storage.models  # registers the tables on SQLModel.metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through storage.db.Database.migrate()")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
