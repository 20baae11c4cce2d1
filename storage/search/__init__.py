"""Full-text and vector index backends over the ``memoryitem`` table.

Full text: SQLite FTS5 (porter stemming) or PostgreSQL tsvector. Vectors: pgvector when the
migration could enable it, otherwise an exact NumPy scan over a per-user in-memory copy of the
stored float32 vectors (measured faster than sqlite-vec's brute-force ``vec0`` here, and it
works with the stdlib ``sqlite3`` that cannot load extensions).
"""

from __future__ import annotations

from storage.search.base import FullTextIndex, SearchFilter, VectorIndex
from storage.search.fulltext import PostgresFullText, SqliteFullText, fts_terms
from storage.search.vectors import ExactVectorIndex, PgVectorIndex, vector_index_for

__all__ = [
    "ExactVectorIndex",
    "FullTextIndex",
    "PgVectorIndex",
    "PostgresFullText",
    "SearchFilter",
    "SqliteFullText",
    "VectorIndex",
    "fts_terms",
    "full_text_for",
    "vector_index_for",
]


def full_text_for(dialect: str) -> FullTextIndex:
    """The full-text backend for a SQLAlchemy dialect name."""
    return PostgresFullText() if dialect == "postgresql" else SqliteFullText()
