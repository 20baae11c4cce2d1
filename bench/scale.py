"""Benchmark: how late reminders arrive when many are due in the same minute.

    .venv/bin/python -m bench.scale                         # 1,000 reminders over 30 s, SQLite
    .venv/bin/python -m bench.scale --reminders 200 --spread 10
    .venv/bin/python -m bench.scale --database-url postgresql://postgres@127.0.0.1/bench

Real parts throughout (database with migrations, the leader, APScheduler, the due timer, the
outbox) on the real clock; only the channel is an in-memory recorder. Each reminder is due at
its own instant within ``spread`` seconds; lateness is arrival minus due. The baseline in the
same run is the same load with the exact timer off (the periodic 10 s ``reminders.fire`` job
and the outbox's poll only, as before issue 22).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert
from sqlmodel import select

from bench._stats import pct
from bot.app.build import build_app, start_app
from bot.config import Settings, normalise_database_url
from bot.messages import OutboundMessage, Receipt
from storage.models import ChannelIdentity, Reminder, User
from tests.fakes.channel import RecordingChannel


class ArrivalChannel(RecordingChannel):
    """Records when each reminder arrived, by its text."""

    def __init__(self, expected: int) -> None:
        super().__init__("fake")
        self.arrived: dict[str, datetime] = {}
        self.expected = expected
        self.done = asyncio.Event()

    async def send(self, msg: OutboundMessage) -> Receipt:
        self.arrived.setdefault(msg.text, datetime.now(UTC))
        if len(self.arrived) >= self.expected:
            self.done.set()
        return await super().send(msg)


async def run(reminders: int, spread: float, url: str | None, exact: bool) -> list[float]:
    """Lateness in seconds of every reminder."""
    with tempfile.TemporaryDirectory() as tmp:
        values: dict[str, object] = {"data_dir": Path(tmp), "jobs_send_rate": 0}
        if url:
            values["database_url_setting"] = normalise_database_url(url)
        app = build_app(Settings(_env_file=None, **values))  # type: ignore[arg-type]
        await start_app(app)
        if not exact:
            app.jobs.service.timer = None  # the baseline: polls only
        channel = ArrivalChannel(reminders)
        app.dispatcher.register(channel)
        service = app.jobs.service
        try:
            users = max(1, reminders // 5)
            made = datetime.now(UTC)
            async with app.db.session() as s:
                conn = await s.connection()
                await conn.execute(
                    insert(User),
                    [
                        {"display_name": f"u{i}", "timezone": "UTC", "created_at": made}
                        for i in range(users)
                    ],
                )
                ids = list((await s.exec(select(User.id).where(User.created_at == made))).all())
                await conn.execute(
                    insert(ChannelIdentity),
                    [
                        {
                            "user_id": uid,
                            "channel": "fake",
                            "account": "bench",
                            "sender_id": str(uid),
                            "chat_id": str(uid),
                            "created_at": made,
                        }
                        for uid in ids
                    ],
                )
            await service.start()  # competes, wins (alone) and renews its lease
            await asyncio.sleep(2)  # past the jobs' first runs
            assert service.is_leader
            start = datetime.now(UTC) + timedelta(seconds=3)
            rng = random.Random(22)
            due = {
                f"r{i}": start + timedelta(seconds=rng.uniform(0, spread)) for i in range(reminders)
            }
            async with app.db.session() as s:
                conn = await s.connection()
                await conn.execute(
                    insert(Reminder),
                    [
                        {
                            "user_id": ids[i % len(ids)],
                            "text": name,
                            "next_at": when,
                            "timezone": "UTC",
                            "status": "active",
                            "fired": 0,
                            "created_at": made,
                        }
                        for i, (name, when) in enumerate(due.items())
                    ],
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(channel.done.wait(), spread + 60)
        finally:
            await service.stop()
            await app.close()
    late = []
    for name, when in due.items():
        got = channel.arrived.get(f"⏰ Reminder: {name}")
        late.append((got - when).total_seconds() if got else float("inf"))
    return late


def _line(label: str, late: list[float]) -> str:
    lost = sum(1 for v in late if v == float("inf"))
    ok = [v for v in late if v != float("inf")] or [float("nan")]
    return (
        f"{label:<22} p50 {pct(ok, 50):+.2f} s  p95 {pct(ok, 95):+.2f} s  "
        f"max {max(ok):+.2f} s  (n={len(ok)}, not delivered {lost})"
    )


def main() -> None:
    """Run the exact timer and the poll-only baseline on the same load; print lateness."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--reminders", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=30.0, help="seconds the due times span")
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    args, _ = parser.parse_known_args()
    print(f"{args.reminders} reminders due within {args.spread:g} s")
    exact = asyncio.run(run(args.reminders, args.spread, args.database_url, exact=True))
    print(_line("exact timer", exact), flush=True)
    poll = asyncio.run(run(args.reminders, args.spread, args.database_url, exact=False))
    print(_line("baseline: polls only", poll), flush=True)


if __name__ == "__main__":
    main()
