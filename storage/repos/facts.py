"""Facts about a user (simple version; the memory issue adds extraction and search)."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import bindparam
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.models import Fact, utcnow
from storage.repos._conn import connection_of
from storage.repos._upsert import add_unless_taken


def fact_hash(text: str) -> str:
    """A hash that treats case, spacing and end punctuation as the same fact."""
    norm = re.sub(r"\s+", " ", text.strip().lower()).rstrip(".!")
    return hashlib.sha256(norm.encode()).hexdigest()[:32]


def settle_twins(data: dict[str, list[dict[str, Any]]]) -> int:
    """In an export's rows, mark each later live copy of a fact as replaced by the first one.

    The database keeps one live fact per user and wording (migration 0023); older versions
    could keep two (requests at once, a forget undone after the words were stored again), and
    their exports would be refused whole. The twin stays, replaced, and leaves the search
    index, as the upgrade settles a database's twins. Returns how many were settled.
    """
    first: dict[tuple[str, str], Any] = {}
    twins: set[str] = set()
    for row in data.get("fact") or []:
        if row.get("forgotten_at") is not None or row.get("superseded_by") is not None:
            continue
        words = row.get("text_hash") or fact_hash(str(row.get("text") or ""))
        key = (str(row.get("user_id")), str(words))
        if key in first:
            row["superseded_by"] = first[key]
            twins.add(str(row.get("id")))
        else:
            first[key] = row.get("id")
    if twins:
        data["memoryitem"] = [
            item
            for item in data.get("memoryitem") or []
            if not (item.get("kind") == "fact" and str(item.get("source_id")) in twins)
        ]
    return len(twins)


_ACTIVE = (
    select(Fact)
    .where(
        col(Fact.user_id) == bindparam("user_id"),
        col(Fact.forgotten_at).is_(None),
        col(Fact.superseded_by).is_(None),
    )
    .order_by(col(Fact.id))
)
_PROMPT_LINES = (
    sa.select(col(Fact.text), col(Fact.category))
    .where(
        col(Fact.user_id) == bindparam("user_id"),
        col(Fact.forgotten_at).is_(None),
        col(Fact.superseded_by).is_(None),
    )
    .order_by(col(Fact.id))
)
"""Every turn's prompt reads the user's facts through this: two columns, not ORM objects."""


class FactRepo:
    """Adds, lists and forgets one user's facts."""

    def __init__(self, session: AsyncSession) -> None:
        self.s = session

    async def add(
        self,
        user_id: int,
        text: str,
        category: str = "notes",
        source_message_ids: list[int] | None = None,
    ) -> tuple[Fact, bool]:
        """Store a fact; an exact repeat returns the existing one and ``False``.

        Also when the repeat was stored by another transaction after the check: the unique
        index on live facts refuses the second insert (rolled back to a savepoint), and the
        one stored first is returned.
        """
        h = fact_hash(text)
        existing = await self._live(user_id, h)
        if existing is not None:
            return existing, False
        fact = Fact(
            user_id=user_id,
            text=text.strip(),
            category=category,
            text_hash=h,
            source_message_ids=source_message_ids,
        )
        refused = await add_unless_taken(self.s, fact)
        if refused is None:
            return fact, True
        existing = await self._live(user_id, h)  # the same words stored meanwhile
        if existing is None:
            raise refused
        return existing, False

    async def _live(self, user_id: int, h: str) -> Fact | None:
        """The user's live fact (not forgotten, not superseded) with this hash."""
        res = await self.s.exec(
            select(Fact).where(
                Fact.user_id == user_id,
                Fact.text_hash == h,
                col(Fact.forgotten_at).is_(None),
                col(Fact.superseded_by).is_(None),
            )
        )
        return res.first()

    async def get(self, fact_id: int) -> Fact | None:
        """A fact by id, whoever it belongs to (for the operator's CLI)."""
        return await self.s.get(Fact, fact_id)

    async def every(self, user_id: int) -> list[Fact]:
        """All of the user's facts, forgotten and superseded ones too, oldest first."""
        res = await self.s.exec(select(Fact).where(Fact.user_id == user_id).order_by(col(Fact.id)))
        return list(res.all())

    async def supersede(self, user_id: int, old_id: int, new: Fact, now: datetime) -> None:
        """Mark the user's fact ``old_id`` as replaced by ``new`` (not someone else's)."""
        old = await self.s.get(Fact, old_id)
        if old is None or old.user_id != user_id:
            return
        await self.s.flush()  # ``new`` gets its id
        old.superseded_by = new.id
        old.updated_at = now
        self.s.add(old)

    async def active(self, user_id: int, category: str | None = None) -> list[Fact]:
        """The user's current facts (not forgotten, not superseded), oldest first."""
        if not category:  # every turn's prompt: the statement is built once
            res = await self.s.exec(_ACTIVE, params={"user_id": user_id})
            return list(res.all())
        q = select(Fact).where(
            Fact.user_id == user_id,
            col(Fact.forgotten_at).is_(None),
            col(Fact.superseded_by).is_(None),
            Fact.category == category,
        )
        return list((await self.s.exec(q.order_by(col(Fact.id)))).all())

    async def prompt_lines(self, user_id: int) -> list[tuple[str, str]]:
        """(text, category) of the user's current facts, oldest first (``active``'s rows)."""
        conn = await connection_of(self.s)
        rows = (await conn.execute(_PROMPT_LINES, {"user_id": user_id})).all()
        return [(str(r[0]), str(r[1])) for r in rows]

    async def forget(self, user_id: int, fact_id: int, now: datetime | None = None) -> Fact | None:
        """Forget one of this user's facts; None if it is not theirs or does not exist."""
        res = await self.s.exec(
            select(Fact).where(
                Fact.id == fact_id, Fact.user_id == user_id, col(Fact.forgotten_at).is_(None)
            )
        )
        fact = res.first()
        if fact is None:
            return None
        fact.forgotten_at = now or utcnow()
        fact.updated_at = fact.forgotten_at
        self.s.add(fact)
        return fact

    async def restore(self, user_id: int, fact_id: int, now: datetime) -> Fact | None:
        """Take back forgetting one of this user's facts (an undo); None when there is none.

        Not when the fact was replaced since, or the same words are known again.
        """
        res = await self.s.exec(
            select(Fact).where(
                Fact.id == fact_id,
                Fact.user_id == user_id,
                col(Fact.forgotten_at).is_not(None),
                col(Fact.superseded_by).is_(None),
            )
        )
        fact = res.first()
        if fact is None:
            return None
        again = await self.s.exec(
            select(Fact.id).where(
                Fact.user_id == user_id,
                Fact.text_hash == fact.text_hash,
                col(Fact.forgotten_at).is_(None),
                col(Fact.superseded_by).is_(None),
            )
        )
        if again.first() is not None:
            return None
        fact.forgotten_at = None
        fact.updated_at = now
        if await add_unless_taken(self.s, fact) is not None:
            return None  # the same words were stored meanwhile
        return fact
