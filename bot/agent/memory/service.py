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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlmodel.ext.asyncio.session import AsyncSession

from bot.agent.llm import LLM
from bot.agent.memory.embeddings import Embedder
from bot.agent.memory.extraction import ExtractionReport, Extractor
from bot.agent.memory.facts import NOT_A_FACT, FactDecision, FactKeeper
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

MAX_INDEXED_WAITING = 1000
"""Turns' index entries kept for their hooks at most (a failed commit leaves one behind)."""


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
        cache_dir: Path | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.index = MemoryIndex(db, embedder, mentions=mentioned_span, cache_dir=cache_dir)
        self.keeper = FactKeeper(self.index, llm)
        self.extractor = Extractor(
            self.index, self.keeper, llm, settle=timedelta(minutes=quiet_minutes)
        )
        self.retriever = Retriever(self.index)
        self.quiet = timedelta(minutes=quiet_minutes)
        self.every_messages = every_messages
        self.tick_seconds = tick_seconds
        self.asked: set[int] = set()
        """Inbound message ids that asked memory a question; hidden once indexed."""
        self._task: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._extracting: set[str] = set()
        """Streams with an extraction task running (started by a turn)."""
        self._turns_seen: dict[str, int] = {}
        """Turns per stream since this process last counted its unread messages."""
        self._to_embed: list[tuple[int, int, str]] = []
        """Turns' messages waiting for their vector: (item id, user id, text)."""
        self._embedding: asyncio.Task[None] | None = None
        """The task embedding ``_to_embed`` (one at a time, batched)."""
        self._run_lock = asyncio.Lock()
        self._indexed: dict[int, list[tuple[int, int, str]]] = {}
        """Inbound message ids indexed in their turn's own commit (``index_with_turn``), with
        what is left to embed; the turn hook takes them from here instead of the database."""

    async def index_pending(self, user_id: int | None = None, *, embed: bool = True) -> int:
        """Index every not-yet-indexed message (public: pendant and import call it too).

        ``embed=False``: searchable by words only until the background task embeds them.
        """
        return await self._index_pending(user_id, embed=embed, now=self.clock.now())

    async def _index_pending(self, user_id: int | None, *, embed: bool, now: datetime) -> int:
        # An episode still growing at ``now`` waits for its vector (``Extractor.settled``).
        added = await self.index.index_pending(
            user_id=user_id, embed=embed, settled_before=now - self.quiet
        )
        await self._hide_asked()
        return added

    async def _hide_asked(self) -> None:
        """Hide the messages that asked memory a question, now that they are indexed."""
        if self.asked:
            by_user: dict[int, list[int]] = {}
            async with self.db.session() as s:
                owners = await MessageRepo(s).owners(list(self.asked))
            for mid, uid in owners.items():
                by_user.setdefault(uid, []).append(mid)
            for uid, mids in by_user.items():
                await self.index.hide_messages(uid, mids)
                self.asked.difference_update(mids)

    async def on_turn(self, turn: StoredTurn) -> None:
        """Dispatcher hook: index the turn's message; extract when N messages are unread.

        Extraction runs as a tracked background task so the next message in the
        conversation does not wait for the model (``drain`` awaits it).
        """
        # Only the turn's own message: a scan for everything unindexed would cost more the
        # longer the history (the background pass catches what other paths stored).
        todo = self._indexed.pop(turn.inbound_id, None)
        if todo is None:  # not indexed with its turn (a command, a fixed reply, the LLM down)
            todo = await self.index.index_messages(turn.user_id, [turn.inbound_id])
        if todo:
            # Awaited (the next turn finds it by meaning too), but shared: turns arriving
            # together have their messages embedded in one model call.
            await asyncio.shield(self._queue_embedding(todo))
        if turn.inbound_id in self.asked:
            await self._hide_asked()
        scope = f"conv:{turn.conversation_id}"
        if scope in self._extracting:
            return  # one extraction per stream at a time; it reads up to the newest message
        # Ask the database only once this process has seen enough turns of the stream to
        # make N unread possible (other processes' turns: the background pass counts them).
        seen = self._turns_seen.get(scope, 0) + 1
        if seen < self.every_messages:
            self._turns_seen[scope] = seen
            return
        self._turns_seen.pop(scope, None)
        async with self.db.session() as s:
            unread = await CursorRepo(s).unread(turn.user_id, scope, self.every_messages)
        if len(unread) >= self.every_messages and scope not in self._extracting:
            self._extracting.add(scope)
            task = asyncio.create_task(self._extract_quietly(turn.user_id, scope))
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)

    def index_with_turn(
        self, user_id: int, message_id: int
    ) -> Callable[[AsyncSession], Awaitable[None]]:
        """A write indexing the turn's inbound message in the turn's own commit.

        One unit of work fewer per message: the turn hook then only embeds what it left.
        Should that commit fail, the hook never runs for the turn; the entry is dropped when
        many are left behind, and the hook of a later turn or the background pass indexes it.
        """

        async def write(s: AsyncSession) -> None:
            todo = await self.index.index_messages_in(s, user_id, [message_id])
            while len(self._indexed) >= MAX_INDEXED_WAITING:
                self._indexed.pop(next(iter(self._indexed)))
            self._indexed[message_id] = todo

        return write

    def _queue_embedding(self, todo: list[tuple[int, int, str]]) -> asyncio.Task[None]:
        """Many turns' messages in one model call (group commit); the task that embeds them.

        The task runs until the queue is empty, so it also embeds what is queued meanwhile.
        """
        self._to_embed.extend(todo)
        if self._embedding is None:
            task = asyncio.create_task(self._embed_queued())
            self._embedding = task
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)
        return self._embedding

    async def _embed_queued(self) -> None:
        size = self.index.batch_size
        try:
            while self._to_embed:
                batch, self._to_embed = self._to_embed[:size], self._to_embed[size:]
                await self.index.embed_items(batch)  # an embedder failure: the pass retries
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not store vectors of new messages; the background pass retries")
        finally:
            self._embedding = None

    async def _extract_quietly(self, user_id: int, scope: str) -> None:
        try:
            await self._extract_logged(user_id, scope)
        finally:
            self._extracting.discard(scope)

    async def _extract_logged(self, user_id: int, scope: str) -> None:
        try:
            await self.extract(user_id, scope, self.clock.now())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "extraction failed (user=%s scope=%s); the quiet pass retries", user_id, scope
            )

    async def drain(self) -> None:
        """Wait for extraction and embedding tasks started by turns."""
        while self._jobs:
            await asyncio.gather(*list(self._jobs), return_exceptions=True)

    async def extract(self, user_id: int, scope: str, now: datetime) -> ExtractionReport:
        """Run extraction on one stream now."""
        tz = await self._tz(user_id)
        return await self.extractor.process_stream(user_id, scope, tz, now)

    async def run_due(self, now: datetime) -> DueReport:
        """One pass of the background job; ``now`` is injected so tests drive it directly."""
        async with self._run_lock:
            report = DueReport(indexed=await self._index_pending(None, embed=True, now=now))
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
        self,
        user_id: int,
        conversation_ids: set[int],
        *,
        progress: Progress | None = None,
        embed: bool = True,
    ) -> int:
        """Index imported messages and cut them into episodes.

        Stand-in summaries and no facts: imported history is untrusted, and summarising it
        would cost one model call per episode. ``embed=False`` returns once everything is
        searchable by its words; the vectors are then computed in batches by
        ``index.embed_missing`` (the import command's second step, or the background task).
        """
        added = await self.index.index_pending(user_id=user_id, progress=progress, embed=embed)
        tz = await self._tz(user_id)
        now = self.clock.now()
        for conv_id in sorted(conversation_ids):
            await self.extractor.process_stream(
                user_id, f"conv:{conv_id}", tz, now, facts=False, summarize=False, embed=embed
            )
        return added

    @staticmethod
    def remember_reply(decision: FactDecision) -> str:
        """What to tell the user after an explicit "remember ..."."""
        fact = decision.fact
        if fact is None:
            return f"{NOT_A_FACT}; nothing was stored."
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
