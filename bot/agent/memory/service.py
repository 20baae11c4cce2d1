"""MemoryService: the one object the rest of lifebot talks to about memory.

- ``on_turn`` (a dispatcher hook): index new messages, run extraction every N messages.
- ``run_due(now)`` (the periodic job body, clock injected): index anything stored by other
  paths (pendant, imports), extract from streams quiet for ``quiet_minutes``, and give
  episodes made while the model was down their proper summaries.
- ``start``/``stop``: the tracked background task that calls ``run_due`` every tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.agent.llm import LLM
from bot.agent.memory.embeddings import Embedder
from bot.agent.memory.extraction import ExtractionReport, Extractor
from bot.agent.memory.facts import FactDecision, FactKeeper
from bot.agent.memory.index import MemoryIndex, Progress
from bot.agent.retrieval import Retriever
from bot.agent.retrieval.timeparse import mentioned_span
from bot.clock import Clock, zone
from bot.messages import StoredTurn
from storage.db import Database
from storage.repos.episodes import CursorRepo
from storage.repos.facts import FactRepo
from storage.repos.messages import MessageRepo
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DueReport:
    """What one periodic run did (for logs and tests)."""

    indexed: int = 0
    streams: int = 0
    facts: int = 0
    resummarized: int = 0


class MemoryService:
    """Indexing, extraction and retrieval for every user of one process."""

    def __init__(
        self,
        db: Database,
        llm: LLM | None,
        embedder: Embedder,
        clock: Clock,
        *,
        quiet_minutes: float = 10.0,
        every_messages: int = 20,
        tick_seconds: float = 60.0,
    ) -> None:
        self.db = db
        self.clock = clock
        self.index = MemoryIndex(db, embedder, mentions=mentioned_span)
        self.keeper = FactKeeper(self.index, llm)
        self.extractor = Extractor(self.index, self.keeper, llm)
        self.retriever = Retriever(self.index)
        self.quiet = timedelta(minutes=quiet_minutes)
        self.every_messages = every_messages
        self.tick_seconds = tick_seconds
        self.asked: set[int] = set()
        """Inbound message ids that asked memory a question; hidden once indexed."""
        self._task: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._run_lock = asyncio.Lock()

    async def index_pending(self, user_id: int | None = None) -> int:
        """Index every not-yet-indexed message (public: pendant and import call it too)."""
        added = await self.index.index_pending(user_id=user_id)
        if self.asked:
            by_user: dict[int, list[int]] = {}
            async with self.db.session() as s:
                owners = await MessageRepo(s).owners(list(self.asked))
            for mid, uid in owners.items():
                by_user.setdefault(uid, []).append(mid)
            for uid, mids in by_user.items():
                await self.index.hide_messages(uid, mids)
                self.asked.difference_update(mids)
        return added

    async def on_turn(self, turn: StoredTurn) -> None:
        """Dispatcher hook: index the turn's message; extract when N messages are unread.

        Extraction runs as a tracked background task so the next message in the
        conversation does not wait for the model (``drain`` awaits it).
        """
        await self.index_pending(turn.user_id)
        scope = f"conv:{turn.conversation_id}"
        async with self.db.session() as s:
            unread = await CursorRepo(s).unread(turn.user_id, scope, self.every_messages)
        if len(unread) >= self.every_messages:
            task = asyncio.create_task(self._extract_quietly(turn.user_id, scope))
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)

    async def _extract_quietly(self, user_id: int, scope: str) -> None:
        try:
            await self.extract(user_id, scope, self.clock.now())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "extraction failed (user=%s scope=%s); the quiet pass retries", user_id, scope
            )

    async def drain(self) -> None:
        """Wait for extraction tasks started by turns."""
        while self._jobs:
            await asyncio.gather(*list(self._jobs), return_exceptions=True)

    async def extract(self, user_id: int, scope: str, now: datetime) -> ExtractionReport:
        """Run extraction on one stream now."""
        tz = await self._tz(user_id)
        return await self.extractor.process_stream(user_id, scope, tz, now)

    async def run_due(self, now: datetime) -> DueReport:
        """One pass of the background job; ``now`` is injected so tests drive it directly."""
        async with self._run_lock:
            report = DueReport(indexed=await self.index_pending())
            async with self.db.session() as s:
                streams = await CursorRepo(s).streams_with_unread()
            for user_id, scope, newest, count in streams:
                if count >= self.every_messages or newest <= now - self.quiet:
                    done = await self.extract(user_id, scope, now)
                    report.streams += 1
                    report.facts += sum(
                        1 for d in done.facts if d.action in ("added", "superseded")
                    )
            tz_of = await self._zones()
            report.resummarized = await self.extractor.resummarize(
                now - self.quiet, tz_of, retry_now=now
            )
            return report

    async def tick(self, now: datetime) -> str:
        """One background pass, summarised for ``lifebot jobs`` (the leader's job body)."""
        r = await self.run_due(now)
        return (
            f"indexed {r.indexed}, extracted {r.streams} streams ({r.facts} facts), "
            f"resummarized {r.resummarized}"
        )

    async def remember(
        self,
        user_id: int,
        text: str,
        *,
        sources: list[int] | None = None,
        category: str | None = None,
    ) -> FactDecision:
        """Store what the user explicitly asked to remember (dedupe included)."""
        return await self.keeper.remember(
            user_id, text, now=self.clock.now(), category=category, sources=sources
        )

    async def after_import(
        self, user_id: int, conversation_ids: set[int], *, progress: Progress | None = None
    ) -> int:
        """Index imported messages and cut them into episodes.

        Stand-in summaries and no facts: imported history is untrusted, and summarising it
        would cost one model call per episode.
        """
        added = await self.index.index_pending(user_id=user_id, progress=progress)
        tz = await self._tz(user_id)
        now = self.clock.now()
        for conv_id in sorted(conversation_ids):
            await self.extractor.process_stream(
                user_id, f"conv:{conv_id}", tz, now, facts=False, summarize=False
            )
        return added

    @staticmethod
    def remember_reply(decision: FactDecision) -> str:
        """What to tell the user after an explicit "remember ..."."""
        fact = decision.fact
        if fact is None:
            return "That's too long for me to keep as one fact; try a shorter sentence."
        if decision.action == "known":
            return f"I already knew: {fact.text}"
        if decision.action == "superseded" and decision.replaced is not None:
            return f"Got it, updated: {fact.text} (instead of: {decision.replaced.text})"
        return f"Got it, I'll remember: {fact.text}"

    async def forget_that(self, user_id: int, conversation_id: int) -> str:
        """Forget the fact this conversation just touched; it will not be extracted again.

        That is a fact cited by the last answer, else the newest fact learned from here.
        """
        now = self.clock.now()
        async with self.db.session() as s:
            last = await MessageRepo(s).last_answer(user_id, conversation_id)
            cited = [
                int(c["source_id"])
                for c in (last.citations or [] if last else [])
                if c.get("kind") == "fact" and str(c.get("source_id", "")).isdigit()
            ]
            if not cited:
                recent = await MessageRepo(s).history(user_id, conversation_id, 50)
                ids = {m.id for m in recent if m.id is not None}
                for fact in reversed(await FactRepo(s).active(user_id)):
                    if ids & set(fact.source_message_ids or []):
                        cited = [fact.id or 0]
                        break
        forgotten = [f for fid in cited if (f := await self.keeper.forget(user_id, fid, now))]
        if not forgotten:
            return (
                "I'm not sure which fact you mean. Send /facts to see what I know, then /forget ID."
            )
        texts = "; ".join(f.text for f in forgotten)
        return f"Forgotten: {texts}. I won't learn it again from your messages."

    def start(self) -> None:
        """Start the periodic task (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="memory-periodic")

    async def stop(self) -> None:
        """Cancel the periodic task and pending extractions; wait for them to end."""
        for job in list(self._jobs):
            job.cancel()
        await asyncio.gather(*list(self._jobs), return_exceptions=True)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop the task and release the embedder's connections."""
        await self.stop()
        closer = getattr(self.index.embedder, "close", None)
        if closer is not None:
            await closer()

    async def _loop(self) -> None:
        while True:
            try:
                report = await self.run_due(self.clock.now())
                if report.streams or report.indexed or report.resummarized:
                    log.info(
                        "memory: indexed %d, extracted %d streams (%d facts), resummarized %d",
                        report.indexed,
                        report.streams,
                        report.facts,
                        report.resummarized,
                    )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("memory background run failed; trying again next tick")
            await asyncio.sleep(self.tick_seconds)

    async def _tz(self, user_id: int) -> ZoneInfo:
        async with self.db.session() as s:
            user = await UserRepo(s).get(user_id)
        return zone(user.timezone if user else "UTC")

    async def _zones(self) -> dict[int, ZoneInfo]:
        async with self.db.session() as s:
            users = await UserRepo(s).all()
        return {u.id: zone(u.timezone) for u in users if u.id is not None}
