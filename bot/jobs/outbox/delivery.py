"""The outbox worker: every push is sent at most once, and proven delivered by a receipt.

A push is a Delivery row with a unique key. To send one the worker marks it ``sending`` (a
conditional update: nobody else can have it), stores the outbound message, calls the adapter,
and stores the channel's message id as proof. What can go wrong, and what happens:

* rate limited: wait what the channel asks, try the same row again;
* transient failure: back to ``pending`` with exponential backoff, ``failed`` after N tries;
* permanent failure (:class:`~bot.errors.Unreachable`): the identity is marked unreachable and
  the push goes to the user's next linked reachable identity, at once;
* quiet hours: a non-urgent push is held until the window ends, never dropped;
* the peer is away (:class:`~bot.errors.Away`, a pendant not connected here): the push waits
  for it (:class:`AwayDeadlines`), handed to the process the pendant is connected to, if any;
  then it goes to the next linked identity, and the delivered row says why;
* a briefing more than three hours late (downtime) is ``skipped`` and the reason stored;
* the process stops after the channel accepted a message but before its receipt was stored:
  the row is still ``sending`` on restart. If the adapter can be asked (:class:`KeyedChannel`,
  it tags every push with the row's key) the worker asks and either records the receipt it
  finds or sends again. Otherwise the row becomes ``uncertain`` and is **not** sent again:
  at most once, never twice, and ``lifebot jobs`` shows it. An uncertain *reminder* is then
  followed by a note that repeats it and says it may be a repeat (the user timed it: silence
  is the worse failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.adapters.base import ChannelAdapter
from bot.clock import Clock, zone
from bot.dispatch.receipts import send_and_record
from bot.errors import Away, ChannelError, RateLimited, TransientChannelError, Unreachable
from bot.jobs.localtime import in_quiet_hours, quiet_hours_end
from bot.jobs.outbox.sending import KeyedChannel, PresenceChannel, RateGate, SendStats, Target
from bot.messages import Address, Button, OutboundMessage, Receipt
from bot.metrics import Counter, Histogram
from storage.db import Database
from storage.models import ChannelIdentity, Delivery, Message, User
from storage.notify import notify_push
from storage.repos.leases import Fence
from storage.repos.messages import ConversationRepo, MessageRepo
from storage.repos.outbox import SCHEDULED_KINDS, OutboxRepo, Push
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

PUSHES = Counter(
    "lifebot_pushes_total",
    "Pushes the outbox finished (reminders, briefings, proposals, notices), by kind and "
    "outcome: delivered or failed.",
    ("kind", "outcome"),
)
LATENESS = Histogram(
    "lifebot_push_lateness_seconds",
    "Seconds a scheduled push was delivered after it was due.",
)


def _delivered(row: Delivery, now: datetime) -> None:
    PUSHES.inc(row.kind, "delivered")
    if row.kind in SCHEDULED_KINDS and row.due_at is not None:
        due = row.due_at if row.due_at.tzinfo else row.due_at.replace(tzinfo=now.tzinfo)
        LATENESS.observe(max(0.0, (now - due).total_seconds()))


@dataclass(frozen=True, slots=True)
class AwayDeadlines:
    """How long a push waits for an away peer (a pendant offline) before the next channel.

    Counted from the time the push was first due (LIFEBOT_PUSH_AWAY_*_SECONDS).
    """

    reminder: timedelta = timedelta(minutes=2)
    """Reminders: time-critical, so they fall back soon."""
    briefing: timedelta = timedelta(minutes=30)
    """Morning briefings and proposed events: they can wait for the pendant longer."""
    other: timedelta = timedelta(minutes=10)
    """Every other kind of push (notices, weekly reviews, answers)."""

    def of(self, kind: str) -> timedelta:
        """The deadline for a push of ``kind``."""
        if kind == "reminder":
            return self.reminder
        if kind in ("briefing", "proposal"):
            return self.briefing
        return self.other


AWAY_RETRY = timedelta(seconds=5)
"""How often a waiting push looks again (a safety net: a pendant that reconnects gets what
waits for it at once, through ``Outbox.deliver_waiting``)."""

Composer = Callable[[Delivery, datetime], Awaitable[str]]
"""Writes the text of a row that was queued without one (briefings)."""


class Outbox:
    """Sends due outbox rows through the registered adapters."""

    def __init__(
        self,
        *,
        db: Database,
        adapters: Mapping[str, ChannelAdapter],
        clock: Clock,
        composers: Mapping[str, Composer] | None = None,
        late_limit: timedelta = timedelta(hours=3),
        max_attempts: int = 6,
        base_backoff: float = 30.0,
        concurrency: int = 32,
        rate_per_channel: float = 30.0,
        max_rate_wait: float = 120.0,
        settle_after: timedelta = timedelta(seconds=30),
        away: AwayDeadlines | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.db = db
        self.adapters = adapters
        self.clock = clock
        self.composers: dict[str, Composer] = dict(composers or {})
        self.late_limit = late_limit
        self.max_attempts = max_attempts
        self.base_backoff = base_backoff
        self.concurrency = concurrency
        self.rate = rate_per_channel
        self.max_rate_wait = max_rate_wait
        self.settle_after = settle_after
        self.away = away or AwayDeadlines()
        self._sleep = sleep
        self._gates: dict[str, RateGate] = {}
        self._inflight: set[int] = set()
        self._conversations: dict[tuple[int, Address], int] = {}
        """Conversation ids by (user, address): the pushed message is stored in that chat."""
        self._wake = asyncio.Event()
        self._stopping = False
        self._fence: Fence | None = None
        # SQLite has one writer at a time and makes the others busy-wait with sleeps; queueing
        # our own writes on a lock is much faster than letting 32 senders collide there.
        self._write_lock: AbstractAsyncContextManager[object] = (
            asyncio.Lock() if db.is_sqlite else nullcontext()
        )

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncSession]:
        """A write transaction (queued behind our other writes on SQLite)."""
        async with self._write_lock, self.db.session() as s:
            yield s

    # --- the worker loop -------------------------------------------------------------------

    def kick(self) -> None:
        """Make a running worker look for due rows now."""
        self._wake.set()

    def resume(self, fence: Fence | None = None) -> None:
        """Allow sending again after ``request_stop`` (a new term as leader).

        Every claim made in this term carries ``fence``: after a takeover it is refused.
        """
        self._stopping = False
        self._fence = fence

    def request_stop(self) -> None:
        """Finish the sends in flight, start no new ones, and leave ``run_forever``."""
        self._stopping = True
        self._wake.set()

    async def run_forever(self, poll: float = 2.0) -> None:
        """Send due rows until cancelled; wakes every ``poll`` seconds or when kicked."""
        await self.reconcile(self.clock.now())
        while not self._stopping:
            self._wake.clear()
            try:
                await self.run_due(self.clock.now())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the outbox worker failed a pass; trying again shortly")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=poll)

    async def run_due(self, now: datetime, batch: int = 500) -> SendStats:
        """Send every row due by ``now``, ``concurrency`` at a time.

        Rows stream through: the next batch is fetched as soon as the last row of this one has
        started, so the channel never idles at batch boundaries.
        """
        stats = SendStats()
        sem = asyncio.Semaphore(self.concurrency)
        tasks: set[asyncio.Task[None]] = set()

        async def one(row_id: int) -> None:
            try:
                await self._process(row_id, now, stats)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("outbox row %s failed unexpectedly", row_id)
                stats.errors.append(f"{row_id}: {exc}")
            finally:
                self._inflight.discard(row_id)
                sem.release()

        cursor: tuple[datetime, int] | None = None
        try:
            while not self._stopping:
                async with self.db.session() as s:
                    rows = await OutboxRepo(s).due(now, batch, cursor)
                if not rows:
                    break
                # A keyset cursor: every row is looked at once per pass, even one that fails.
                cursor = (rows[-1].due_at or now, rows[-1].id or 0)
                for row in rows:
                    if row.id is None or row.id in self._inflight:
                        continue
                    await sem.acquire()
                    self._inflight.add(row.id)
                    task = asyncio.create_task(one(row.id), name=f"outbox-{row.id}")
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return stats

    # --- one row ---------------------------------------------------------------------------

    async def _process(
        self, row_id: int, now: datetime, stats: SendStats, *, handed_over: bool = False
    ) -> None:
        """Send one pending row; ``handed_over``: another process's leader asked us to.

        A hand-over is sent only when the row's peer is connected here, and whether this
        process leads (or once led) plays no part: no fence, not held back by ``request_stop``.
        The claim is a conditional update either way, so the row still goes out once.
        """
        if self._stopping and not handed_over:
            return  # stopping: rows not started yet stay pending for the next leader
        async with self.db.session() as s:
            row = await OutboxRepo(s).get(row_id)
            if row is None or row.status != "pending":
                return
            user = await UserRepo(s).get(row.user_id)
            identities = await UserRepo(s).identities(row.user_id)
        if user is None:
            await self._finish(row_id, "failed", "the user no longer exists", "pending")
            stats.failed += 1
            return
        payload = dict(row.payload or {})
        targets = self._targets(user, identities, _avoided(payload))
        if handed_over and not self._held_here(targets):
            return  # handed over, but its peer is not connected here: not ours to send
        if await self._hold_back(row, user, payload, now, stats):
            return
        if payload.get("text") is None:
            payload["text"] = await self._compose(row, now)  # stored with the claim below
        if not targets:
            await self._no_target(row, now, stats)
            return
        fence = None if handed_over else self._fence
        await self._send(row, user, payload, targets, now, stats, fence)

    def _held_here(self, targets: list[Target]) -> bool:
        if not targets:
            return False
        adapter = self.adapters.get(targets[0].address.channel)
        return isinstance(adapter, PresenceChannel) and adapter.holds(targets[0].address)

    async def _hold_back(
        self, row: Delivery, user: User, payload: dict[str, object], now: datetime, st: SendStats
    ) -> bool:
        """Skip a briefing that is too late; hold a non-urgent push during quiet hours."""
        assert row.id is not None
        due = row.due_at or now
        if row.kind == "briefing" and now - due > self.late_limit:
            hours = (now - due).total_seconds() / 3600
            reason = f"skipped: {hours:.1f} h late (the limit is {self._late_words()})"
            await self._finish(row.id, "skipped", reason, "pending")
            st.skipped += 1
            return True
        tz = zone(user.timezone)
        if not payload.get("urgent") and in_quiet_hours(now, tz, user.quiet_start, user.quiet_end):
            until = quiet_hours_end(now, tz, user.quiet_end or "07:00")
            payload["deferred_until"] = until.isoformat()
            async with self._tx() as s:
                await OutboxRepo(s).defer(row.id, until, payload)
            st.deferred += 1
            return True
        return False

    def _late_words(self) -> str:
        return f"{self.late_limit.total_seconds() / 3600:g} h"

    async def _compose(self, row: Delivery, now: datetime) -> str:
        composer = self.composers.get(row.kind)
        if composer is None:
            return ""
        return await composer(row, now)

    def _targets(
        self,
        user: User,
        identities: list[ChannelIdentity],
        avoid: frozenset[tuple[str, str]] = frozenset(),
    ) -> list[Target]:
        """Reachable identities with a running adapter: preferred channel first, then oldest.

        ``avoid`` names (channel, chat id) pairs that must not get this push (an Omi device,
        which cannot receive anything, for the answer to a question it heard).
        """
        out: list[Target] = []
        for ident in identities:
            if ident.unreachable_at is not None or not ident.chat_id or ident.id is None:
                continue
            if (ident.channel, ident.chat_id) in avoid:
                continue
            if ident.channel not in self.adapters:
                continue
            out.append(Target(ident.id, Address(ident.channel, ident.account, ident.chat_id)))
        out.sort(key=lambda t: t.address.channel != user.preferred_channel)
        return out

    async def _no_target(self, row: Delivery, now: datetime, stats: SendStats) -> None:
        """No reachable identity on a running channel: retry later (a channel may start)."""
        assert row.id is not None
        reason = "no reachable channel for this user is running"
        async with self._tx() as s:
            repo = OutboxRepo(s)
            if row.attempts + 1 >= self.max_attempts:
                await repo.finish(row.id, "failed", reason, from_="pending")
                stats.failed += 1
                return
            # Counted as an attempt so it cannot wait forever.
            await repo.claim(row.id, now, channel="", account="", chat_id="", message_id=None)
            await repo.release(row.id, now + self._backoff(row.attempts + 1), reason)
        stats.retried += 1

    async def _send(
        self,
        row: Delivery,
        user: User,
        payload: dict[str, object],
        targets: list[Target],
        now: datetime,
        stats: SendStats,
        fence: Fence | None,
    ) -> None:
        """Claim the row (under ``fence``, the leader's term, if any) and send it."""
        assert row.id is not None
        assert row.key is not None
        assert user.id is not None
        text = str(payload.get("text") or "")
        raw_buttons = payload.get("buttons") or []
        buttons = [
            Button(str(b[0]), str(b[1]), int(b[2]) if len(b) > 2 else None)
            for b in raw_buttons  # type: ignore[attr-defined]
        ]
        message_id = await self._claim(row, user.id, payload, targets[0].address, text, fence)
        if message_id is None:
            return  # another process has it
        passed: list[str] = []  # why each earlier target was passed over (kept on the row)
        for i, target in enumerate(targets):
            if i:
                stats.fallbacks += 1
                async with self._tx() as s:
                    await OutboxRepo(s).retarget(
                        row.id,
                        channel=target.address.channel,
                        account=target.address.account,
                        chat_id=target.address.chat_id,
                    )
            out = OutboundMessage(target.address, text, buttons=buttons, kind=row.kind)
            outcome = await send_and_record(
                functools.partial(self._attempt, row, out, stats),
                tx=self._tx,
                user_id=user.id,
                message_id=message_id,
                address=target.address,
                record=functools.partial(self._record, row.id, _fell_back(target, passed)),
                now=now,
            )
            if isinstance(outcome, Receipt):
                stats.delivered += 1
                _delivered(row, self.clock.now())
                return
            if isinstance(outcome, Unreachable):
                log.warning(
                    "push %s: %s identity of user %s unreachable (%s); trying the next one",
                    row.id,
                    target.address.channel,
                    user.id,
                    outcome,
                )
                passed.append(f"{target.address.channel} unreachable ({outcome})")
                continue
            if isinstance(outcome, Away):
                why = str(outcome)
                if await self._wait_for(row, target, targets[i + 1 :], why, now, fence):
                    stats.retried += 1
                    return
                waited = self.away.of(row.kind).total_seconds()
                passed.append(f"{why} (the {waited:g} s wait for it ran out)")
                continue  # waited long enough: the next linked channel
            if isinstance(outcome, TransientChannelError):
                await self._retry_later(row, str(outcome), now, stats)
            else:
                await self._finish(
                    row.id, "failed", f"{target.address.channel} refused it: {outcome}", "sending"
                )
                stats.failed += 1
                PUSHES.inc(row.kind, "failed")
            return
        async with self._tx() as s:
            await OutboxRepo(s).finish(
                row.id,
                "failed",
                "every linked channel of this user is unreachable or away",
                from_="sending",
            )
        stats.failed += 1

    async def _claim(
        self,
        row: Delivery,
        user_id: int,
        payload: dict[str, object],
        first: Address,
        text: str,
        fence: Fence | None,
    ) -> int | None:
        """Store the message (once per push) and claim the row; the message's id.

        None when the claim was refused: someone else has the row, or ``fence`` lapsed.
        """
        assert row.id is not None
        async with self._tx() as s:
            conv_id = self._conversations.get((user_id, first))
            if conv_id is None:
                conv_id = (await ConversationRepo(s).get_or_create(user_id, first)).id or 0
            msg_row = await _unsent(s, row, user_id, first)
            if msg_row is None:
                msg_row = await MessageRepo(s).add(
                    user_id,
                    conv_id,
                    role="assistant",
                    text=text,
                    direction="out",
                    channel=first.channel,
                    chat_id=first.chat_id,
                )
            await OutboxRepo(s).set_payload(row.id, payload)
            claimed = await OutboxRepo(s).claim(
                row.id,
                self.clock.now(),
                channel=first.channel,
                account=first.account,
                chat_id=first.chat_id,
                message_id=msg_row.id,
                fence=fence,
            )
            if not claimed:
                await s.rollback()
                return None
        if len(self._conversations) > 100_000:
            self._conversations.clear()
        self._conversations[(user_id, first)] = conv_id  # committed: safe to remember
        return msg_row.id or 0

    async def _wait_for(
        self,
        row: Delivery,
        target: Target,
        rest: list[Target],
        why: str,
        now: datetime,
        fence: Fence | None,
    ) -> bool:
        """A peer is away (a pendant offline): wait for it within the kind's deadline.

        True when the row went back to ``pending`` to try again shortly (a pendant that
        reconnects gets it); False once the deadline has passed: the caller falls back to the
        next linked channel.
        """
        assert row.id is not None
        # From the time it was first due: each wait moves ``due_at`` on.
        first = (row.payload or {}).get("deferred_until") or (row.payload or {}).get(
            "scheduled_for"
        )
        due = datetime.fromisoformat(first) if isinstance(first, str) else (row.due_at or now)
        deadline = due + self.away.of(row.kind)
        if now >= deadline:
            log.info("push %s: %s away past its deadline; next channel", row.id, target.address)
            return False
        then = rest[0].address.channel if rest else "nothing else is linked"
        note = f"waiting: {why}; until {deadline:%H:%M:%S} UTC, then {then}"
        async with self._tx() as s:
            await OutboxRepo(s).release(row.id, min(deadline, now + AWAY_RETRY), note)
            if fence is not None and not self.db.is_sqlite:
                # The leader: the pendant may be connected to another process; hand it over.
                await notify_push(s, row.id)
        return True

    async def take_over(self, row_id: int) -> None:
        """Try a push another process handed over (its pendant may be connected here)."""
        if row_id in self._inflight:
            return
        self._inflight.add(row_id)
        try:
            await self._process(row_id, self.clock.now(), SendStats(), handed_over=True)
        finally:
            self._inflight.discard(row_id)

    async def deliver_waiting(self, user_id: int, limit: int = 100) -> None:
        """A peer of this user just connected here (a pendant): send what waits for it now.

        Without this a push that waits for an offline pendant would reach it at the next
        retry at best, and not at all when that retry falls on the deadline while the pendant
        is connected to another process than the leader.
        """
        async with self.db.session() as s:
            rows = await OutboxRepo(s).waiting(limit, user_id=user_id)
        for row in rows:
            if row.id is not None:
                await self.take_over(row.id)

    async def _attempt(self, row: Delivery, out: OutboundMessage, stats: SendStats) -> Receipt:
        """Send once, waiting out rate limits; raises the ChannelError when it did not go out."""
        assert row.key is not None
        adapter = self.adapters[out.address.channel]
        gate = self._gates.setdefault(out.address.channel, RateGate(self.rate, self._sleep))
        waited = 0.0
        while True:
            await gate.wait()
            try:
                if isinstance(adapter, KeyedChannel):
                    return await adapter.send_keyed(out, row.key)
                return await adapter.send(out)
            except RateLimited as exc:
                # A 429 means "not sent": the same claim may try again after the pause.
                stats.rate_limited += 1
                pause = max(exc.retry_after, 0.05)
                gate.pause(pause)
                waited += pause
                if waited > self.max_rate_wait:
                    raise

    async def _record(self, row_id: int, note: str | None, s: AsyncSession, r: Receipt) -> None:
        """The push's own bookkeeping, in the receipt's transaction: the row is delivered.

        ``note``: why it went to this channel and not the first one (``lifebot jobs``).
        """
        await OutboxRepo(s).delivered(row_id, r.message_id, self.clock.now(), note=note)

    async def _retry_later(self, row: Delivery, error: str, now: datetime, st: SendStats) -> None:
        assert row.id is not None
        attempts = row.attempts + 1
        async with self._tx() as s:
            repo = OutboxRepo(s)
            if attempts >= self.max_attempts:
                await repo.finish(
                    row.id, "failed", f"gave up after {attempts} tries: {error}", from_="sending"
                )
                st.failed += 1
                PUSHES.inc(row.kind, "failed")
                return
            await repo.release(row.id, now + self._backoff(attempts), error)
        st.retried += 1

    def _backoff(self, attempts: int) -> timedelta:
        return timedelta(seconds=min(3600.0, self.base_backoff * 2 ** (attempts - 1)))

    async def _finish(self, row_id: int, status: str, reason: str, from_: str) -> None:
        async with self._tx() as s:
            await OutboxRepo(s).finish(row_id, status, reason, from_=from_)

    # --- after a crash ---------------------------------------------------------------------

    async def reconcile(self, now: datetime) -> int:
        """Settle rows a stopped process left in ``sending``; returns how many were settled.

        Only rows claimed more than ``settle_after`` ago and not in flight here: a leader that
        just lost its lock stops within a heartbeat, and its last sends must not be doubled.
        """
        cutoff = now - self.settle_after
        async with self.db.session() as s:
            stuck = [r for r in await OutboxRepo(s).sending(cutoff) if r.id not in self._inflight]
        for row in stuck:
            await self._settle(row, now)
        return len(stuck)

    async def _settle(self, row: Delivery, now: datetime) -> None:
        assert row.id is not None
        assert row.key is not None
        adapter = self.adapters.get(row.channel or "")
        address = Address(row.channel or "", row.account or "", row.chat_id or "")
        if isinstance(adapter, KeyedChannel):
            try:
                found = await adapter.find_sent(address, row.key)
            except ChannelError as exc:
                log.warning("could not ask %s about push %s: %s", row.channel, row.id, exc)
                return
            async with self._tx() as s:
                repo = OutboxRepo(s)
                if found is not None:
                    await repo.delivered(row.id, found.message_id, now)
                    if row.message_id is not None:
                        await MessageRepo(s).set_receipt(
                            row.user_id, row.message_id, found.message_id
                        )
                    log.info("push %s had arrived before the stop; receipt recorded", row.id)
                else:
                    await repo.release(row.id, now, "resent: the channel never got it")
            return
        reason = (
            f"uncertain: the process stopped after handing this to {row.channel} and before "
            f"its receipt was stored; {row.channel} cannot be asked whether it arrived, so it "
            "is not sent again (at most once)"
        )
        async with self._tx() as s:
            await OutboxRepo(s).finish(row.id, "uncertain", reason, from_="sending")
            follow = _maybe_missed(row, now)
            if follow is not None:
                await OutboxRepo(s).enqueue([follow], now)
        log.warning("push %s is uncertain after a stop; not resending it", row.id)


def _maybe_missed(row: Delivery, now: datetime) -> Push | None:
    """For an uncertain reminder: a note that repeats it, saying it may be a repeat.

    The user timed a reminder; one lost because the stop came before the channel got it is
    worse than a line that says plainly it may repeat the last one. Other pushes (a briefing,
    a question) stay at most once. The note's key is the push's own plus ``:check``, so a
    second reconciliation adds nothing.
    """
    text = str((row.payload or {}).get("text") or "")
    if row.kind != "reminder" or row.key is None or not text:
        return None
    return Push(
        user_id=row.user_id,
        kind=row.kind,
        key=f"{row.key}:check",
        due_at=now,
        text=f"In case this did not reach you (I was restarting as it went out): {text}",
        urgent=True,
        extra={k: v for k, v in (row.payload or {}).items() if k == "reminder_id"},
    )


def _fell_back(target: Target, passed: list[str]) -> str | None:
    """The note a push delivered on a later channel keeps: where, and why not the first."""
    if not passed:
        return None
    return f"fell back to {target.address.channel}: {'; '.join(passed)}"


async def _unsent(s: AsyncSession, row: Delivery, user_id: int, first: Address) -> Message | None:
    """The message an earlier attempt of this push stored and never sent, to send again.

    Every attempt stores the message before it goes out; without this a push waiting for an
    offline pendant (tried every few seconds) or retried after failures left one copy in the
    conversation per attempt, and the model read the reminder a dozen times.
    """
    if row.message_id is None:
        return None
    msg = await MessageRepo(s).get(user_id, row.message_id)
    if msg is None or msg.status != "stored":
        return None
    if (msg.channel, msg.chat_id) != (first.channel, first.chat_id):
        return None  # it goes first to another chat now: stored there
    return msg


def _avoided(payload: Mapping[str, object]) -> frozenset[tuple[str, str]]:
    """The payload's ``not_to`` list of [channel, chat id] pairs."""
    raw = payload.get("not_to") or []
    if not isinstance(raw, list):
        return frozenset()
    return frozenset((str(p[0]), str(p[1])) for p in raw if isinstance(p, list) and len(p) == 2)
