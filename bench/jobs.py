"""Benchmark: morning-briefing fan-out through a channel that enforces 30 messages per second.

    .venv/bin/python -m bench.jobs                      # 10,000 users at 30 msg/s (~6 minutes)
    .venv/bin/python -m bench.jobs --users 1000         # a scaled run
    .venv/bin/python -m bench.jobs --rate 300           # same 10,000 rows, 10x faster channel
    .venv/bin/python -m bench.jobs --no-pace            # rely on the channel's 429s alone

Everything real but the channel's servers: SQLite database with migrations, the planner, the
outbox worker composing a (deterministic) briefing per user and sending it. The floor is
users / rate seconds; the report gives the time as a ratio to it, and counts duplicates and
losses both at the channel (per idempotency key) and in the database (receipts).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, insert
from sqlmodel import select

from bot.app.build import build_app, start_app
from bot.config import Settings
from storage.models import ChannelIdentity, Delivery, User
from tests.fakes.channel import RateLimitedChannel
from tests.fakes.clock import ManualClock

NOW = datetime(2025, 6, 2, 7, 30, tzinfo=UTC)


async def run(users: int, rate: float, pace: bool, concurrency: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            _env_file=None,
            data_dir=Path(tmp),
            jobs_send_rate=rate if pace else 0,
        )
        clock = ManualClock(NOW)
        app = build_app(settings, clock=clock)
        await start_app(app)
        channel = RateLimitedChannel("fake", rate=rate)
        app.dispatcher.register(channel)
        jobs = app.jobs
        jobs.outbox.concurrency = concurrency
        try:
            async with app.db.session() as s:
                created = NOW - timedelta(hours=1)
                conn = await s.connection()
                await conn.execute(
                    insert(User),
                    [
                        {"display_name": f"user{i}", "timezone": "UTC", "created_at": created}
                        for i in range(users)
                    ],
                )
                ids = list((await s.exec(select(User.id))).all())
                await conn.execute(
                    insert(ChannelIdentity),
                    [
                        {
                            "user_id": uid,
                            "channel": "fake",
                            "account": "bench",
                            "sender_id": str(uid),
                            "chat_id": str(uid),
                            "created_at": created,
                        }
                        for uid in ids
                    ],
                )
            t0 = time.perf_counter()
            print(await jobs.briefings.plan(NOW))
            planned = time.perf_counter() - t0
            t1 = time.perf_counter()
            stats = await jobs.outbox.run_due(NOW)
            elapsed = time.perf_counter() - t1
            async with app.db.session() as s:
                proven = (
                    await s.exec(
                        select(func.count()).where(
                            Delivery.kind == "briefing",
                            Delivery.status == "delivered",
                            Delivery.receipt.is_not(None),  # type: ignore[union-attr]
                        )
                    )
                ).one()
        finally:
            await app.close()
    floor = users / rate
    return {
        "users": users,
        "rate": rate,
        "plan_s": planned,
        "send_s": elapsed,
        "floor_s": floor,
        "ratio": elapsed / floor,
        "delivered": channel.delivered,
        "duplicates": sum(n - 1 for n in channel.per_key.values() if n > 1),
        "losses": users - len(channel.per_key),
        "db_receipts": int(proven),
        "rejected_429": channel.rejected,
        "worker_errors": len(stats.errors),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark; from ``python -m bench`` (all benchmarks) a 1,000-user run."""
    if argv is None:
        argv = sys.argv[1:] if __name__ == "__main__" else ["--users", "1000"]
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=30.0)
    parser.add_argument("--no-pace", action="store_true", help="no client-side pacing")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    r = asyncio.run(run(args.users, args.rate, not args.no_pace, args.concurrency))
    print(
        f"briefing fan-out: {r['users']:.0f} users through a {r['rate']:g} msg/s channel "
        f"({'paced' if not args.no_pace else 'unpaced'}, concurrency {args.concurrency})\n"
        f"  planning:   {r['plan_s']:.2f} s\n"
        f"  delivery:   {r['send_s']:.1f} s = {r['ratio']:.3f} x the {r['floor_s']:.1f} s floor\n"
        f"  duplicates: {r['duplicates']:.0f}   losses: {r['losses']:.0f}   "
        f"receipts in the database: {r['db_receipts']:.0f}\n"
        f"  429s from the channel: {r['rejected_429']:.0f}   "
        f"worker errors: {r['worker_errors']:.0f}"
    )


if __name__ == "__main__":
    main()
