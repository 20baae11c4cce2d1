"""calendarsource: one per user, kind and address (concurrent subscribes linked it twice)

The check for a linked address and the insert were two statements, so one feed subscribed
several times at once (the API, the web page, /calendar add) was linked once per request,
and every copy's events showed. A unique index on (user_id, kind, url) makes the database
decide. Copies already stored are merged first: the oldest source stays; a copy's event that
the oldest also has is deleted (a proposal merged into it now points at the oldest's), any
other moves to the oldest (source and uid renamed as its own reads name them); then the copy
goes. Addresses are compared exactly, as linking compares them (on PostgreSQL by their md5,
as an index row there cannot hold a long address).

Revision ID: 0024_calendar_once
Revises: 0023_fact_once
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0024_calendar_once"
down_revision = "0023_fact_once"
branch_labels = None
depends_on = None


def _merge(conn: Any, user_id: int, kind: str, copy: int, kept: int) -> None:
    """Move or drop the events of source ``copy`` into ``kept``, then delete ``copy``."""
    old, new = f"{kind}:{copy}", f"{kind}:{kept}"
    old_front, new_front = f"{user_id}/{old}/", f"{user_id}/{new}/"
    rows = "SELECT id, uid, title_key, start_at, end_at FROM calendarevent WHERE source = :s"
    theirs = conn.execute(sa.text(rows), {"s": new}).all()
    by_uid = {r.uid: r.id for r in theirs}
    by_time = {(r.title_key, str(r.start_at), str(r.end_at)): r.id for r in theirs}
    for ev in conn.execute(sa.text(rows), {"s": old}).all():
        uid = new_front + ev.uid[len(old_front) :] if ev.uid.startswith(old_front) else ev.uid
        # An older version's uid hashed the source too: the same event is found by its time.
        twin = by_uid.get(uid) or by_time.get((ev.title_key, str(ev.start_at), str(ev.end_at)))
        if twin is not None:
            conn.execute(
                sa.text("UPDATE proposal SET event_id = :t WHERE event_id = :e"),
                {"t": twin, "e": ev.id},
            )
            conn.execute(sa.text("DELETE FROM calendarevent WHERE id = :e"), {"e": ev.id})
        else:
            conn.execute(
                sa.text("UPDATE calendarevent SET source = :s, uid = :u WHERE id = :e"),
                {"s": new, "u": uid, "e": ev.id},
            )
    conn.execute(sa.text("DELETE FROM calendarsource WHERE id = :c"), {"c": copy})


def upgrade() -> None:
    conn = op.get_bind()
    first: dict[tuple[int, str, str], int] = {}
    sources = "SELECT id, user_id, kind, url FROM calendarsource ORDER BY id"
    for src in conn.execute(sa.text(sources)).all():
        kept = first.setdefault((src.user_id, src.kind, src.url), src.id)
        if kept != src.id:
            _merge(conn, src.user_id, src.kind, src.id, kept)
    # PostgreSQL indexes the address's md5: a btree row holds ~2.7 kB, and a longer address (a
    # CalDAV server's collection, a feed linked before addresses were capped) failed the build.
    address = sa.text("md5(url)") if conn.dialect.name == "postgresql" else "url"
    op.create_index(
        "ux_calendarsource_user_url", "calendarsource", ["user_id", "kind", address], unique=True
    )


def downgrade() -> None:
    op.drop_index("ux_calendarsource_user_url", table_name="calendarsource")
