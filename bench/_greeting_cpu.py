"""CPU per greeting of whichever lifebot checkout is first on ``sys.path`` (a script, not a module).

``bench dispatch`` runs this file once in this checkout and once in an older one (a temporary
git worktree of the reference commit, issue 28), alternately, with the same interpreter and the
same installed libraries, so the ratio shows only what lifebot's own code changed. It uses
only names both checkouts have (``build_app``, ``start_app``, the test fakes), and the same
method as ``bench.dispatch.greetings``: a started app on SQLite, 100 paired users, 20 warm-up
greetings, then ``BATCHES`` batches of 100 greetings (memory extraction every 20 included),
the whole process's CPU per greeting of the best batch. Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from bot.app.build import build_app, start_app
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, Step
from tests.support.app import make_settings
from tests.support.builders import make_inbound

GREETINGS = 100
"""Greetings per batch."""
BATCHES = 4
"""Batches per run; the best one counts (other work on a shared machine only ever adds). The
first batch also pays for loading what a process loads once (the embedding model at the
first full episode), and later ones vary by a sixth between themselves on this machine, so
one batch after the first was too few to compare checkouts by."""


async def measure() -> dict[str, float]:
    """The best batch's CPU per greeting, in milliseconds."""
    fake = FakeLLM()
    fake.default = lambda _body: Step(text="Hello!")
    await fake.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            app = build_app(make_settings(Path(tmp), fake))
            await start_app(app)
            try:
                app.dispatcher.register(RecordingChannel("fake"))
                async with app.db.session() as s:
                    repo = UserRepo(s)
                    for i in range(100):
                        user = await repo.create(f"u{i}")
                        assert user.id is not None
                        await repo.add_identity(user.id, "fake", "acct", f"u{i}", chat_id=f"u{i}")
                for _ in range(20):
                    await app.dispatcher.handle(make_inbound("hi", sender="u0"))
                await app.memory.drain()
                best = float("inf")
                for _ in range(BATCHES):
                    cpu0 = time.process_time()
                    for _ in range(GREETINGS):
                        result = await app.dispatcher.handle(make_inbound("hi", sender="u0"))
                        assert result.status == "answered", result
                    await app.memory.drain()
                    best = min(best, (time.process_time() - cpu0) / GREETINGS * 1000)
            finally:
                await app.close()
    finally:
        await fake.stop()
    return {"cpu_ms": best}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(measure())))
