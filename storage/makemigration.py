"""Developer helper: write a new Alembic migration from the difference to the models.

Usage: ``python -m storage.makemigration "what changed" REVISION_ID``
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from storage.db import MIGRATIONS, Database


def _config(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


async def _main(message: str, rev_id: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'gen.db'}")
        async with db.engine.begin() as conn:
            await conn.run_sync(lambda c: command.upgrade(_config(c), "head"))
            await conn.run_sync(
                lambda c: command.revision(
                    _config(c), message=message, autogenerate=True, rev_id=rev_id
                )
            )
        await db.dispose()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
