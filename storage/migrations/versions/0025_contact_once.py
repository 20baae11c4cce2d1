"""contact: one per user and name in any case ("Anna" and "anna" made at once were two)

Contacts are looked up by name in any case, but the unique name was case-sensitive: "Anna"
and "anna" posted together were both stored, and every later "Anna" fitted two people. A
unique index on (user_id, lower(name)) makes the database decide. Twins already stored are
merged first, as the database folds their names: the oldest keeps its spelling and gains what
only a twin knew (other names; a relationship or way to reach them it lacks, or differs in, is
added after "; "); then the twin goes. Nothing refers to a contact by id.

Revision ID: 0025_contact_once
Revises: 0024_calendar_once
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0025_contact_once"
down_revision = "0024_calendar_once"
branch_labels = None
depends_on = None


# A copy of storage/repos/people.py's ``_joined`` on purpose: a migration must keep doing what
# it did when it was written, whatever the app's code becomes.
def _joined(kept: str, twin: str, sep: str) -> str:
    """``kept`` with each of ``twin``'s parts (split on ``sep``) it lacks, in any case."""
    parts = [p.strip() for p in kept.split(sep.strip()) if p.strip()]
    for part in (p.strip() for p in twin.split(sep.strip())):
        if part and part.lower() not in {p.lower() for p in parts}:
            parts.append(part)
    return sep.join(parts)


def upgrade() -> None:
    conn = op.get_bind()
    first: dict[tuple[int, str], Any] = {}
    rows = "SELECT id, user_id, lower(name) AS folded, aliases, relationship, reach FROM contact"
    for row in conn.execute(sa.text(rows + " ORDER BY id")).all():
        kept = first.get((row.user_id, row.folded))
        if kept is None:
            first[(row.user_id, row.folded)] = dict(row._mapping)
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
    op.create_index(
        "ux_contact_user_folded_name",
        "contact",
        ["user_id", sa.text("lower(name)")],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("ux_contact_user_folded_name", table_name="contact")
