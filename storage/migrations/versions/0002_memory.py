"""memory: episodes, search index, fact extraction state

Revision ID: 0002
Revises: 0001

Full text: an FTS5 table kept in step by triggers on SQLite (porter stemming); a generated
``tsv`` column with a GIN index on PostgreSQL. Vectors: a float32 BLOB column everywhere, and
a pgvector ``embedding_vec`` column when the server offers the ``vector`` extension.
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

import storage.models

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SQLITE_FTS = [
    """CREATE VIRTUAL TABLE memoryitem_fts USING fts5(
        text, speaker, content='memoryitem', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER memoryitem_fts_ai AFTER INSERT ON memoryitem BEGIN
        INSERT INTO memoryitem_fts(rowid, text, speaker) VALUES (new.id, new.text, new.speaker);
    END""",
    """CREATE TRIGGER memoryitem_fts_ad AFTER DELETE ON memoryitem BEGIN
        INSERT INTO memoryitem_fts(memoryitem_fts, rowid, text, speaker)
        VALUES ('delete', old.id, old.text, old.speaker);
    END""",
    """CREATE TRIGGER memoryitem_fts_au AFTER UPDATE OF text, speaker ON memoryitem BEGIN
        INSERT INTO memoryitem_fts(memoryitem_fts, rowid, text, speaker)
        VALUES ('delete', old.id, old.text, old.speaker);
        INSERT INTO memoryitem_fts(rowid, text, speaker) VALUES (new.id, new.text, new.speaker);
    END""",
]

POSTGRES_FTS = [
    """ALTER TABLE memoryitem ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
        to_tsvector('english', coalesce(speaker, '') || ' ' || coalesce(text, ''))) STORED""",
    "CREATE INDEX ix_memoryitem_tsv ON memoryitem USING gin (tsv)",
]


def _pgvector_available(bind: sa.engine.Connection) -> bool:
    row = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).first()
    if row is None:
        return False
    # CREATE EXTENSION needs rights the database user may lack: try it in a savepoint so a
    # refusal leaves the migration's transaction usable and we fall back to exact search.
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    except sa.exc.DBAPIError:
        return False
    return True


def upgrade() -> None:
    op.create_table(
        "memoryitem",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("ts", storage.models.UTCDateTime(), nullable=False),
        sa.Column("ts_end", storage.models.UTCDateTime(), nullable=True),
        sa.Column("conversation_id", sa.Integer(), nullable=True),
        sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("speaker", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("ref", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("text", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("hidden", sa.Boolean(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embed_model", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("kind", "source_id", name="uq_memoryitem_source"),
    )
    with op.batch_alter_table("memoryitem", schema=None) as batch_op:
        batch_op.create_index("ix_memoryitem_user_ts", ["user_id", "ts"], unique=False)
        batch_op.create_index("ix_memoryitem_user_id_id", ["user_id", "id"], unique=False)

    op.create_table(
        "episode",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("scope", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("summary", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("people", sa.JSON(), nullable=True),
        sa.Column("topics", sa.JSON(), nullable=True),
        sa.Column("start_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("end_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("source_message_ids", sa.JSON(), nullable=True),
        sa.Column("summarized", sa.Boolean(), nullable=False),
        sa.Column("created_at", storage.models.UTCDateTime(), nullable=False),
        sa.Column("updated_at", storage.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("episode", schema=None) as batch_op:
        batch_op.create_index("ix_episode_user_start", ["user_id", "start_at"], unique=False)

    op.create_table(
        "memorycursor",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("scope", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("last_message_id", sa.Integer(), nullable=False),
        sa.Column("updated_at", storage.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "scope", name="uq_memorycursor_scope"),
    )

    with op.batch_alter_table("fact", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "origin",
                sqlmodel.sql.sqltypes.AutoString(),
                nullable=False,
                server_default="explicit",
            )
        )

    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for stmt in SQLITE_FTS:
            op.execute(stmt)
    elif bind.dialect.name == "postgresql":
        for stmt in POSTGRES_FTS:
            op.execute(stmt)
        if _pgvector_available(bind):
            # No fixed dimension: the embedding model is a setting. Exact search with <=>.
            op.execute("ALTER TABLE memoryitem ADD COLUMN embedding_vec vector")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("memoryitem_fts_au", "memoryitem_fts_ad", "memoryitem_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS memoryitem_fts")
    with op.batch_alter_table("fact", schema=None) as batch_op:
        batch_op.drop_column("origin")
    op.drop_table("memorycursor")
    with op.batch_alter_table("episode", schema=None) as batch_op:
        batch_op.drop_index("ix_episode_user_start")
    op.drop_table("episode")
    with op.batch_alter_table("memoryitem", schema=None) as batch_op:
        batch_op.drop_index("ix_memoryitem_user_id_id")
        batch_op.drop_index("ix_memoryitem_user_ts")
    op.drop_table("memoryitem")
