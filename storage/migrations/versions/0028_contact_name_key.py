"""contact: one per user and name key ("Ângela" and "ângela" made at once were two on SQLite)

0025 made the name unique in any case with an index on (user_id, lower(name)), but SQLite's
lower() folds only ASCII: "Ângela" and "ângela" posted together were both stored there, and
every later "Ângela" fitted two people. On both databases an accent typed as a separate mark
made another name too. Each contact now keeps its name's key, folded in Python (Unicode's
compatibility caseless match, spaces squeezed: ``storage.models.people.contact_name_key``),
and a unique index on (user_id, name_key) decides on both databases; it replaces 0025's.
Twins the key reveals are merged first, as 0025 merged its own: the oldest keeps its spelling
and gains what only a twin knew (other names; a relationship or way to reach them it lacks,
or differs in, is added after "; "); then the twin goes. Nothing refers to a contact by id.

Revision ID: 0028_contact_name_key
Revises: 0027_album_inbox
"""

import unicodedata
from typing import Any

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0028_contact_name_key"
down_revision = "0027_album_inbox"
branch_labels = None
depends_on = None

_str = sqlmodel.sql.sqltypes.AutoString


# Copies of storage/models/people.py's ``contact_name_key`` and storage/repos/people.py's
# ``_joined`` on purpose: a migration must keep doing what it did when it was written,
# whatever the app's code becomes.
def _name_key(name: str) -> str:
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFD", name).casefold())
    return " ".join(unicodedata.normalize("NFKC", folded.casefold()).split())


def _joined(kept: str, twin: str, sep: str) -> str:
    """``kept`` with each of ``twin``'s parts (split on ``sep``) it lacks, in any case."""
    parts = [p.strip() for p in kept.split(sep.strip()) if p.strip()]
    for part in (p.strip() for p in twin.split(sep.strip())):
        if part and part.lower() not in {p.lower() for p in parts}:
            parts.append(part)
    return sep.join(parts)


def upgrade() -> None:
    op.add_column("contact", sa.Column("name_key", _str(), nullable=False, server_default=""))
    conn = op.get_bind()
    first: dict[tuple[int, str], Any] = {}
    rows = "SELECT id, user_id, name, aliases, relationship, reach FROM contact ORDER BY id"
    for row in conn.execute(sa.text(rows)).all():
        key = _name_key(row.name)
        kept = first.get((row.user_id, key))
        if kept is None:
            first[(row.user_id, key)] = dict(row._mapping)
            conn.execute(
                sa.text("UPDATE contact SET name_key = :key WHERE id = :id"),
                {"key": key, "id": row.id},
            )
            continue
        kept["aliases"] = _joined(kept["aliases"], row.aliases, ", ")
        kept["relationship"] = _joined(kept["relationship"], row.relationship, "; ")
        kept["reach"] = _joined(kept["reach"], row.reach, "; ")
        conn.execute(
            sa.text(
                "UPDATE contact SET aliases = :aliases, relationship = :relationship, "
                "reach = :reach WHERE id = :id"
            ),
            {k: kept[k] for k in ("id", "aliases", "relationship", "reach")},
        )
        conn.execute(sa.text("DELETE FROM contact WHERE id = :id"), {"id": row.id})
    op.drop_index("ux_contact_user_folded_name", table_name="contact")
    op.create_index("ux_contact_user_name_key", "contact", ["user_id", "name_key"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_contact_user_name_key", table_name="contact")
    # SQLite rebuilds the table for this and would not carry an index on an expression over:
    # 0025's index is made after it.
    with op.batch_alter_table("contact", schema=None) as batch_op:
        batch_op.drop_column("name_key")
    op.create_index(
        "ux_contact_user_folded_name",
        "contact",
        ["user_id", sa.text("lower(name)")],
        unique=True,
    )
