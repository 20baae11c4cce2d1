"""Dispatch overhead per message, excluding the LLM, on an empty and a 100k-message database.

The fake LLM answers instantly over loopback; the database is SQLite on disk. Each figure is
compared with a bare call of the same fake LLM through the same client, measured in this run:
the difference is what lifebot itself costs (dedupe, identity, locks, storage, delivery,
memory indexing). The run is repeated with the first user's history pre-filled with 100,000
indexed messages (with vectors): a per-message cost that grows with history shows there.
SQL statements and commits per message are counted on the engine.

CPU per greeting, as a same-run ratio (issue 28): the same greetings go through two apps
built from the same code, interleaved (baseline, lean, three times each; the best run of
each, as other work on a shared machine only ever adds). The *baseline* talks to SQLite
through SQLAlchemy's stock aiosqlite adapter, which makes four trips to the database thread
per statement (the per-message path before issue 28); the *lean* one through
``storage/sqlite_driver.py`` (one trip per statement). Everything else is the same code in
both, so statements saved elsewhere (the order check, issue 28) lower both figures alike and
the ratio shows only what the adapter saves; the statement counts are printed beside it. CPU
is ``time.process_time`` of the whole process: the fake LLM server, the client and the
database thread are included, as they are in the p50 wall figures.

Against the code before issue 28 (the target's "21-31 ms today"): that ratio isolates only the
adapter, so the same greetings also run, alternately, in a temporary git worktree of the
commit before the issue's work (``BENCH_DISPATCH_AGAINST``, default ``e0dfffc``; empty to
skip), each in a fresh process of this interpreter with these libraries
(``bench/_greeting_cpu.py``); what differs is only lifebot's own code.

``python -m bench dispatch`` (both sizes); ``BENCH_DISPATCH_SIZES=0`` for the empty one only.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlmodel import col, select

from bench._stats import ms, pct, summary
from bot.app.build import App, build_app, start_app
from storage.db import Database
from storage.models import Message
from storage.repos.episodes import CursorRepo
from storage.repos.messages import MessageRepo
from storage.repos.users import UserRepo
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, Step
from tests.support.app import make_settings
from tests.support.builders import make_inbound

MESSAGES = 100
SENTENCES = 40
ROUNDS = int(os.environ.get("BENCH_DISPATCH_ROUNDS", "3"))
"""Runs of the baseline and of the lean path (interleaved) for the CPU ratios."""
RATE_MESSAGES = 200
"""Messages per concurrency level (split over the conversations)."""
SIZES = [int(n) for n in os.environ.get("BENCH_DISPATCH_SIZES", "0,100000").split(",")]
AGAINST = os.environ.get("BENCH_DISPATCH_AGAINST", "e0dfffc")
"""The commit whose per-message path the CPU is compared with: the one before issue 28."""
REPO = Path(__file__).resolve().parents[1]
WORDS = ("lunch with anna at the harbour on friday about the garden plans and the old car").split()  # noqa: SIM905  (a sentence reads better)


async def bare_llm_call(application: App) -> float:
    """One streamed chat completion through the same client, nothing else."""
    start = time.perf_counter()
    async for _ in application.llm.stream([{"role": "user", "content": "hello"}]):
        pass
    return time.perf_counter() - start


async def add_users(application: App, count: int) -> None:
    """``count`` paired users u0..u{count-1}, one identity each on the fake channel."""
    async with application.db.session() as s:
        repo = UserRepo(s)
        for i in range(count):
            user = await repo.create(f"u{i}")
            assert user.id is not None
            await repo.add_identity(user.id, "fake", "acct", f"u{i}", chat_id=f"u{i}")


async def prefill(application: App, count: int) -> None:
    """``count`` old messages in u0's conversation, indexed with (dummy) vectors."""
    await application.dispatcher.handle(make_inbound("hi", sender="u0"))  # makes the conversation
    async with application.db.session() as s:
        row = (await s.exec(select(Message).where(col(Message.user_id).is_not(None)))).first()
    assert row is not None
    start = datetime.now(UTC) - timedelta(days=400)
    rows: list[dict[str, Any]] = []
    for n in range(count):
        words = [WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(6 + n % 9)]
        rows.append(
            {
                "user_id": row.user_id,
                "conversation_id": row.conversation_id,
                "direction": "in",
                "role": "user",
                "channel": "fake",
                "account": "acct",
                "chat_id": "u0",
                "sender_id": "u0",
                "external_id": f"old{n}",
                "dedupe_key": f"bench:old:{n}",
                "text": " ".join(words) + f" #{n}",
                "status": "answered",
                "created_at": start + timedelta(minutes=5 * n),
            }
        )
    blob = bytes(384 * 4)
    model = application.memory.index.embedder.model_id
    async with application.db.engine.begin() as conn:
        for i in range(0, count, 5000):
            await conn.execute(sa.insert(Message.__table__), rows[i : i + 5000])  # type: ignore[attr-defined]
        await conn.execute(
            sa.text(
                "INSERT INTO memoryitem (user_id, kind, source_id, ts, conversation_id, channel,"
                " speaker, ref, text, hidden, embedding, embed_model)"
                " SELECT user_id, 'message', id, created_at, conversation_id, channel, '',"
                " external_id, text, false, :blob, :model FROM message"
                " WHERE dedupe_key LIKE 'bench:old:%'"
            ),
            {"blob": blob, "model": model},
        )
    async with application.db.session() as s:  # old history has been through extraction
        last = await MessageRepo(s).add(
            row.user_id or 0, row.conversation_id or 0, role="x", text=""
        )
        await CursorRepo(s).advance(
            row.user_id or 0, f"conv:{row.conversation_id}", last.id or 0, datetime.now(UTC)
        )


class Counter:
    """SQL statements and commits on the engine since the last ``reset``."""

    def __init__(self, application: App) -> None:
        self.statements = 0
        self.commits = 0
        engine = application.db.engine.sync_engine
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)

    def _statement(self, *_args: object) -> None:
        self.statements += 1

    def _commit(self, *_args: object) -> None:
        self.commits += 1

    def reset(self) -> None:
        """Start counting again."""
        self.statements = self.commits = 0


@dataclass(slots=True)
class Greetings:
    """One variant's figures for ``MESSAGES`` greetings in a row."""

    cpu: float
    """Process CPU seconds per greeting (everything this process did meanwhile, the fake LLM
    server and the database thread included)."""
    wall: list[float]
    """Seconds per ``dispatch.handle``."""
    statements: float
    """SQL statements per greeting."""
    commits: float
    """Commits per greeting (units of work; the one-trip adapter skips a read-only one's
    trip to the database thread, but it still counts here)."""


async def greetings(application: App, counter: Counter, sender: str = "u0") -> Greetings:
    """``MESSAGES`` greetings through ``dispatch.handle``, extraction and indexing included."""
    wall: list[float] = []
    counter.reset()
    cpu0 = time.process_time()
    for _ in range(MESSAGES):
        start = time.perf_counter()
        result = await application.dispatcher.handle(make_inbound("hi", sender=sender))
        wall.append(time.perf_counter() - start)
        assert result.status == "answered", result
    await application.memory.drain()
    cpu = (time.process_time() - cpu0) / MESSAGES
    return Greetings(cpu, wall, counter.statements / MESSAGES, counter.commits / MESSAGES)


async def open_app(tmp: Path, fake: FakeLLM, *, one_trip: bool, size: int) -> App:
    """A started app on its own database file, 100 users, ``size`` old messages, warmed up."""
    settings = make_settings(tmp, fake)
    application = build_app(settings, db=Database(settings.database_url, one_trip=one_trip))
    await start_app(application)
    application.dispatcher.register(RecordingChannel("fake"))
    await add_users(application, 100)
    if size:
        t0 = time.perf_counter()
        await prefill(application, size)
        print(f"  (pre-filled {size:,} messages in {time.perf_counter() - t0:.0f} s)")
    for _ in range(20):  # warm up connections and caches
        await bare_llm_call(application)
        await application.dispatcher.handle(make_inbound("hi", sender="u0"))
    await application.memory.drain()
    return application


async def measure(size: int) -> None:
    """One database size: the baseline and the lean path side by side, then the lean path's
    latency for a sentence and its throughput."""
    fake = FakeLLM()
    fake.default = lambda _body: Step(text="Hello!")
    await fake.start()
    figures: dict[bool, Greetings] = {}
    try:
        for one_trip in (False, True) * ROUNDS:  # interleaved: drift hits both alike
            with tempfile.TemporaryDirectory() as tmp:
                application = await open_app(Path(tmp), fake, one_trip=one_trip, size=size)
                try:
                    got = await greetings(application, Counter(application))
                    if one_trip not in figures or got.cpu < figures[one_trip].cpu:
                        figures[one_trip] = got  # the best run of each
                finally:
                    await application.close()
        base, lean = figures[False], figures[True]
        print(f'  greeting ("hi"), CPU of the whole process per message, best of {ROUNDS} runs:')
        for label, g in (("baseline (stock aiosqlite adapter)", base), ("lean path", lean)):
            print(
                f"    {label:<35}: {ms(g.cpu)} CPU, p50 {ms(pct(g.wall, 50))} wall, "
                f"{g.statements:.1f} statements, {g.commits:.1f} commits"
            )
        print(f"    -> lean / baseline CPU per greeting: {lean.cpu / base.cpu:.2f}")
        with tempfile.TemporaryDirectory() as tmp:
            application = await open_app(Path(tmp), fake, one_trip=True, size=size)
            try:
                await lean_details(application)
            finally:
                await application.close()
    finally:
        await fake.stop()


async def lean_details(application: App) -> None:
    """The lean path against a bare LLM call: greeting and sentence latency, throughput."""
    counter = Counter(application)
    bare = [await bare_llm_call(application) for _ in range(MESSAGES)]
    for label, text, count in (
        ("greeting", "hi", MESSAGES),
        ("sentence", "I had lunch with Anna at the harbour today", SENTENCES),
    ):
        handled: list[float] = []
        counter.reset()
        for _ in range(count):
            start = time.perf_counter()
            result = await application.dispatcher.handle(make_inbound(text, sender="u0"))
            handled.append(time.perf_counter() - start)
            assert result.status == "answered", result
        await application.memory.drain()
        b50, d50 = pct(bare, 50), pct(handled, 50)
        print(
            f"  {label}: {counter.statements / count:.1f} SQL statements, "
            f"{counter.commits / count:.1f} commits per message "
            "(memory extraction every 20 included)"
        )
        print(f"    bare fake-LLM call : {summary(bare)}")
        print(f"    dispatch.handle    : {summary(handled)}")
        print(
            f"    -> p50 {d50 / b50:.2f}x a bare LLM call; lifebot's own overhead p50 "
            f"~{ms(d50 - b50)}"
            + (" (a sentence also asks the fast model for a route)" if count != MESSAGES else "")
        )
    for conc in (1, 10, 100):
        per_conv = max(2, RATE_MESSAGES // conc)
        bare_rate = await rate(lambda _i: bare_llm_call(application), conc, per_conv)
        disp_rate = await rate(
            lambda i: application.dispatcher.handle(make_inbound("hi", sender=f"u{i}")),
            conc,
            per_conv,
        )
        print(
            f"  {conc:>3} concurrent conversations: {disp_rate:7.1f} msg/s through "
            f"dispatch, {bare_rate:7.1f} calls/s bare LLM -> ratio "
            f"{disp_rate / bare_rate:.2f}"
        )
    await application.memory.drain()


async def rate(fn: Callable[[int], Awaitable[object]], concurrency: int, per_worker: int) -> float:
    """Throughput of ``concurrency`` workers each awaiting ``fn(worker)`` ``per_worker`` times."""

    async def worker(i: int) -> None:
        for _ in range(per_worker):
            await fn(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return concurrency * per_worker / (time.perf_counter() - start)


def _run(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run a fixed command of this benchmark (git, this interpreter); output captured."""
    return subprocess.run(args, capture_output=True, text=True, check=False, **kw)  # noqa: S603


def greeting_cpu(tree: Path) -> float:
    """CPU ms per greeting of the checkout at ``tree``, measured in a fresh process."""
    script = REPO / "bench" / "_greeting_cpu.py"
    # Run from the tree's root with -c, so the script's own folder (bench/, which holds a
    # telegram.py and a slack.py) is not first on sys.path and only ``tree`` is imported.
    code = f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = _run([sys.executable, "-c", code], cwd=tree, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"greeting CPU in {tree} failed:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_ms"])


def against_reference(rev: str) -> None:
    """CPU per greeting here and at ``rev``, alternately, ``ROUNDS`` times each; best of each."""
    git = ["git", "-C", str(REPO)]
    if _run([*git, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"]).returncode != 0:
        print(f"  (no commit {rev} in this checkout: the comparison with it is skipped)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "reference"
        added = _run([*git, "worktree", "add", "--detach", "--quiet", str(tree), rev])
        if added.returncode != 0:
            print(f"  (could not check out {rev}: {added.stderr.strip()}; comparison skipped)")
            return
        try:
            # Alternately: drift on a shared machine hits both alike.
            pairs = [(greeting_cpu(tree), greeting_cpu(REPO)) for _ in range(ROUNDS)]
        finally:
            _run([*git, "worktree", "remove", "--force", str(tree)])
    reference, here = min(p[0] for p in pairs), min(p[1] for p in pairs)
    print(f"  greeting CPU per message against commit {rev} (before issue 28), best of {ROUNDS}:")
    print(f"    {rev:<10}: {reference:.2f} ms")
    print(f"    this code : {here:.2f} ms")
    print(f"    -> this / {rev}: {here / reference:.2f}")
    # Each round's two runs are back to back: their ratio shrugs off slower and faster spells
    # of a shared machine, which the two bests (perhaps from different rounds) do not.
    ratios = sorted(h / r for r, h in pairs)
    shown = ", ".join(f"{r:.1f}/{h:.1f}" for r, h in pairs)
    print(f"    rounds ({rev}/this, ms): {shown}")
    print(f"    -> median of the rounds' ratios: {ratios[len(ratios) // 2]:.2f}")


async def run() -> None:
    """Every database size in turn."""
    if AGAINST:
        print("-- against the per-message path before issue 28 --", flush=True)
        await asyncio.to_thread(against_reference, AGAINST)
    for size in SIZES:
        print(f"-- database with {size:,} earlier messages of the first user --", flush=True)
        await measure(size)


def main() -> None:
    """Entry point for ``python -m bench dispatch``."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
