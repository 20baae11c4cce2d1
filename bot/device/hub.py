"""The device hub: live connections, session pipelines, recovery and the shared transcriber.

Everything channel-agnostic about the pendant lives here; ``server.py`` only speaks WebSocket
and ``adapter.py`` only translates to the dispatcher's messages.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from bot.clock import Clock
from bot.device import protocol as p
from bot.device.audio import TARGET_RATE
from bot.device.choices import SpokenChoices
from bot.device.feature import DEVICE_AUDIO
from bot.device.options import Connection, DeviceInfo, DeviceOptions
from bot.device.session import SessionDeps, SessionPipeline
from bot.device.spool import Spool
from bot.device.utterance import Utterance
from bot.errors import ChannelError
from bot.messages import Address, InboundMessage
from bot.speech.transcribe import Transcriber
from storage.db import Database
from storage.files import FileStore
from storage.models import AudioSegment, DeviceSession
from storage.repos.devices import DEVICE_ACCOUNT, DEVICE_CHANNEL, DeviceRepo, SessionRepo

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""Transcription tries per utterance (a failure is retried at the next start-up)."""

MessageHandler = Callable[[InboundMessage], Awaitable[object]]


STT_WAITING_PER_WORKER = 12
"""Utterances (each read into memory) that may wait per transcription worker: about what one
30 s window holds when packed."""


class DeviceHub:
    """Owns every session pipeline and knows which device is connected where."""

    def __init__(
        self,
        *,
        db: Database,
        transcriber: Transcriber,
        clock: Clock,
        options: DeviceOptions,
        memory: Any = None,
        files: FileStore | None = None,
        on_ready: Callable[[DeviceInfo], Awaitable[None]] | None = None,
    ) -> None:
        self.db = db
        self.transcriber = transcriber
        self.clock = clock
        self.options = options
        self.memory = memory
        """The memory index (``index_pending``) when the memory feature is present."""
        self.files = files
        """Where a finished session's audio goes with ``keep_audio`` (shared by every host on
        PostgreSQL); None: it stays in this host's spool."""
        self.spool = Spool(options.spool_dir)
        # Several utterances may wait in the transcriber at once: it packs short ones that wait
        # together into one model window. The bound keeps audio held in memory small.
        self.stt_slots = asyncio.Semaphore(options.stt_workers * STT_WAITING_PER_WORKER)
        self.on_message: MessageHandler | None = None
        self.choices = SpokenChoices()
        """Buttons offered to each device, answered by the next utterance."""
        self.connections: dict[str, Connection] = {}
        self.sessions: dict[str, SessionPipeline] = {}
        self._lock = asyncio.Lock()
        self.on_ready = on_ready
        """Called (in the background) when a device's session is ready: the app sends the
        pushes that wait for this device from here, at once."""
        self._retiring: set[asyncio.Task[None]] = set()
        self._greeting: set[asyncio.Task[None]] = set()
        self._live: set[SessionPipeline] = set()
        """Every pipeline not yet stopped (some may have left ``sessions`` already)."""

    def _session_deps(self) -> SessionDeps:
        """What a new session pipeline gets (the options as they are now)."""
        return SessionDeps(
            db=self.db,
            clock=self.clock,
            transcriber=self.transcriber,
            stt_slots=self.stt_slots,
            spool=self.spool,
            options=self.options,
            connection=self.connections.get,
            outcomes=self,
        )

    # --- auth and connections ---------------------------------------------------------------

    async def authenticate(self, token: str) -> DeviceInfo | None:
        """The device a token belongs to; records that it was seen."""
        async with self.db.session() as s:
            device = await DeviceRepo(s).authenticate(token)
            if device is None:
                return None
            await DeviceRepo(s).touch(device.id or 0, self.clock.now())
            return DeviceInfo.of(device)

    async def still_active(self, device: DeviceInfo) -> bool:
        """False once the device was revoked (a connected device is then closed)."""
        async with self.db.session() as s:
            row = await DeviceRepo(s).get(device.id)
            return row is not None and row.revoked_at is None

    async def token_hashes(self, device_ids: list[int]) -> dict[int, str]:
        """The current token digest of each device (``""`` once revoked)."""
        async with self.db.session() as s:
            return await DeviceRepo(s).token_hashes(device_ids)

    async def active_device(self, device_id: int) -> DeviceInfo | None:
        """The device with this id, or None when it is unknown or revoked."""
        async with self.db.session() as s:
            row = await DeviceRepo(s).get(device_id)
            if row is None or row.revoked_at is not None:
                return None
            return DeviceInfo.of(row)

    async def active_device_named(self, name: str) -> DeviceInfo | None:
        """The device with this name, or None when it is unknown or revoked."""
        async with self.db.session() as s:
            row = await DeviceRepo(s).by_name(name)
            if row is None or row.revoked_at is not None:
                return None
            return DeviceInfo.of(row)

    async def revoked(self, device: DeviceInfo) -> bool:
        """True (and the live connection closed) once the device was revoked.

        Checked right before anything from a device is stored or asked: ``device revoke``
        runs in another process, and nothing a revoked token sends may be kept.
        """
        if await self.still_active(device):
            return False
        conn = self.connections.get(device.name)
        if conn is not None:
            await conn.close(p.CLOSE_UNAUTHORIZED, "this device was revoked")
        log.warning("dropped input from revoked device %s", device.name)
        return True

    async def connect(self, conn: Connection) -> None:
        """Make ``conn`` the device's live connection, closing an older one."""
        old = self.connections.get(conn.device.name)
        self.connections[conn.device.name] = conn
        if old is not None and old is not conn:
            await old.close(p.CLOSE_REPLACED, "replaced by a newer connection of this device")

    def ready(self, device: DeviceInfo) -> None:
        """A device said hello and got ``ready``: hand it what waits for it (``on_ready``)."""
        if self.on_ready is None:
            return
        task = asyncio.create_task(self._greet(self.on_ready, device), name=f"ready-{device.name}")
        self._greeting.add(task)
        task.add_done_callback(self._greeting.discard)

    async def _greet(
        self, hook: Callable[[DeviceInfo], Awaitable[None]], device: DeviceInfo
    ) -> None:
        try:
            await hook(device)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pendant %s: could not send the pushes waiting for it", device.name)

    async def disconnect(self, conn: Connection, pipeline: SessionPipeline | None) -> None:
        """The connection ended: keep its audio, let queued work finish in the background."""
        if self.connections.get(conn.device.name) is conn:
            del self.connections[conn.device.name]
        if pipeline is not None:
            await pipeline.detach(conn)
            self._retire_later(pipeline)
        async with self.db.session() as s:
            await DeviceRepo(s).touch(conn.device.id, self.clock.now())

    # --- sessions ---------------------------------------------------------------------------

    async def open_session(
        self,
        conn: Connection,
        hello: p.Hello,
        current: SessionPipeline | None = None,
        *,
        fresh: bool = False,
    ) -> tuple[SessionPipeline, bool]:
        """Resume the session the hello names (or the device's recent one), else start one.

        ``fresh`` always starts a new session (the old one reached its maximum length).
        """
        device, now = conn.device, self.clock.now()
        if current is not None:
            await current.detach(conn)
            self._retire_later(current)
        async with self._lock:
            async with self.db.session() as s:
                repo = SessionRepo(s)
                row = await self._resumable(repo, device, hello, fresh=fresh)
                resumed = row is not None
                if row is None:
                    row = DeviceSession(
                        id=uuid.uuid4().hex,
                        device_id=device.id,
                        user_id=device.user_id,
                        mode=hello.mode,
                        language=hello.language,
                        started_at=now,
                        last_seen_at=now,
                    )
                else:
                    row.mode, row.last_seen_at = hello.mode, now
                    row.language = hello.language or row.language
                s.add(row)
                closed = await repo.close_others(device.id, row.id, now)
            pipeline = self.sessions.get(row.id)
            if pipeline is None:
                pipeline = self._new_pipeline(row, device)
                await pipeline.catch_up()
            pipeline.mode, pipeline.language = row.mode, row.language
            pipeline.attach(conn)
        for old_id in closed:
            old = self.sessions.get(old_id)
            if old is not None:
                old.closed = True
                self._retire_later(old)
            else:
                await self._delete_if_done(old_id)
        return pipeline, resumed

    async def _resumable(
        self, repo: SessionRepo, device: DeviceInfo, hello: p.Hello, *, fresh: bool
    ) -> DeviceSession | None:
        if fresh:
            return None
        if hello.session_id:
            row = await repo.get(hello.session_id)
        else:
            row = await repo.latest_open(device.id)
            window = timedelta(seconds=self.options.resume_seconds)
            if row is not None and self.clock.now() - row.last_seen_at > window:
                row = None
        # Never continue another device's session, nor one recorded for a previous owner.
        if row is None or row.closed_at is not None:
            return None
        return row if (row.device_id, row.user_id) == (device.id, device.user_id) else None

    async def rollover(self, conn: Connection, pipeline: SessionPipeline) -> SessionPipeline:
        """The session reached its maximum length: close it and continue in a new one."""
        hello = p.Hello(mode=pipeline.mode, language=pipeline.language)
        new, _ = await self.open_session(conn, hello, current=pipeline, fresh=True)
        return new

    def _new_pipeline(self, row: DeviceSession, device: DeviceInfo) -> SessionPipeline:
        pipeline = SessionPipeline(self._session_deps(), row, device)
        self.sessions[row.id] = pipeline
        self._live.add(pipeline)
        return pipeline

    async def _stop_pipeline(self, pipeline: SessionPipeline) -> None:
        await pipeline.stop()
        # Only once stopped for sure: a stop cancelled half-way is finished by ``stop()``.
        self._live.discard(pipeline)

    def _retire_later(self, pipeline: SessionPipeline) -> None:
        task = asyncio.create_task(self._retire(pipeline), name=f"retire-{pipeline.id}")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _retire(self, pipeline: SessionPipeline) -> None:
        """Once a detached session has no work left, drop it from memory (and its audio)."""
        await pipeline.drain()
        async with self._lock:
            if pipeline.conn is not None or pipeline.busy:
                return
            if self.sessions.get(pipeline.id) is pipeline:
                del self.sessions[pipeline.id]
        await self._stop_pipeline(pipeline)
        await self._delete_if_done(pipeline.id)

    async def _delete_if_done(self, session_id: str) -> None:
        """Take a closed, fully transcribed session's audio out of the spool.

        It is deleted, or with ``keep_audio`` moved into the file store (kind device-audio).
        """
        if session_id in self.sessions or (self.options.keep_audio and self.files is None):
            return
        async with self.db.session() as s:
            repo = SessionRepo(s)
            row = await repo.get(session_id)
            if row is None or row.closed_at is None:
                return
            waiting, _ = await repo.count_unfinished(session_id)
        if waiting == 0 and self.spool.samples(session_id) <= row.vad_cursor:
            if self.options.keep_audio and self.files is not None:
                path = self.spool.path(session_id)
                if path.exists():
                    key = f"{row.user_id}/{session_id}.pcm"
                    await self.files.put_file(DEVICE_AUDIO.name, key, path)
            self.spool.delete(session_id)

    async def recover(self) -> int:
        """At start-up: cut and queue every bit of spooled audio not yet transcribed."""
        queued = 0
        now = self.clock.now()
        window = timedelta(seconds=self.options.resume_seconds)
        async with self.db.session() as s:
            repo = SessionRepo(s)
            rows = [
                r
                for r in await repo.all_sessions()
                if r.closed_at is None or self.spool.path(r.id).exists()
            ]
            devices = {d.id: d for d in await DeviceRepo(s).all()}
        for row in rows:
            async with self.db.session() as s:
                todo = await SessionRepo(s).unfinished(row.id, MAX_ATTEMPTS)
                # A session nobody can resume any more is closed now (its audio goes once done).
                if row.closed_at is None and now - row.last_seen_at > window:
                    fresh = await SessionRepo(s).get(row.id)
                    if fresh is not None:
                        fresh.closed_at = now
                        s.add(fresh)
                        row.closed_at = now
            waiting = self.spool.samples(row.id) > row.vad_cursor
            device = devices.get(row.device_id)
            if device is None or not (todo or waiting):
                await self._delete_if_done(row.id)
                continue
            pipeline = self._new_pipeline(row, DeviceInfo.of(device))
            pipeline.enqueue([_utterance(seg) for seg in todo])
            queued += len(todo) + await pipeline.catch_up()
            self._retire_later(pipeline)
        if queued:
            log.info("recovering %d spooled utterances from before the restart", queued)
        return queued

    async def drain(self, seconds: float) -> bool:
        """Give queued utterances up to ``seconds`` to finish; True when all did."""
        pipelines = list(self.sessions.values())
        if not pipelines:
            return True
        try:
            async with asyncio.timeout(seconds):
                await asyncio.gather(*(pl.drain() for pl in pipelines))
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop every pipeline; unfinished work stays on disk for the next start."""
        for task in list(self._greeting):
            task.cancel()
        await asyncio.gather(*self._greeting, return_exceptions=True)
        if self._retiring:
            # Drained sessions retire at once (closing files, deleting finished audio).
            await asyncio.wait(set(self._retiring), timeout=1.0)
        for task in list(self._retiring):
            task.cancel()
        await asyncio.gather(*self._retiring, return_exceptions=True)
        for pipeline in list(self._live):
            await self._stop_pipeline(pipeline)
        self.sessions.clear()

    # --- results ----------------------------------------------------------------------------

    async def finish(
        self, utt: Utterance, status: str, text: str, error: str | None = None
    ) -> None:
        """Record the outcome of an utterance."""
        async with self.db.session() as s:
            await SessionRepo(s).finish(utt.segment_id, status, text, self.clock.now(), error)

    async def store_ambient(self, pipeline: SessionPipeline, utt: Utterance, text: str) -> None:
        """Keep an ambient transcript as what the user's day sounded like."""
        meta = {
            "segment_id": f"{pipeline.id}:{utt.seq}",
            "session_id": pipeline.id,
            "start": round(utt.start / TARGET_RATE, 3),
            "end": round(utt.end / TARGET_RATE, 3),
            "device": pipeline.device.name,
            "speaker": "pendant",
        }
        if await self.revoked(pipeline.device):
            await self.finish(utt, "revoked", "")
            return
        async with self.db.session() as s:
            repo = SessionRepo(s)
            seg = await repo.segment(utt.segment_id)
            if seg is None:
                return
            await repo.store_ambient(pipeline.device.name, seg, text, meta)
            await repo.finish(utt.segment_id, "done", text, self.clock.now())

    async def index_memory(self, user_id: int) -> None:
        """Let the memory index pick up new ambient transcripts, when memory is present."""
        index = getattr(self.memory, "index_pending", None)
        if index is None:
            return
        try:
            await index(user_id=user_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("indexing ambient transcripts for user %s failed", user_id)

    async def ask(
        self,
        pipeline: SessionPipeline,
        text: str,
        message_id: str,
        *,
        utt: Utterance | None = None,
    ) -> bool:
        """Hand a question to the dispatcher as the device's message; the reply streams back.

        False when the device was revoked meanwhile: then nothing is asked or stored.
        """
        if self.on_message is None:
            # Raising keeps the utterance pending: it is asked again at the next start.
            raise ChannelError("the device channel has not started")
        if await self.revoked(pipeline.device):
            return False
        raw: dict[str, Any] = {"session_id": pipeline.id}
        if utt is not None:
            raw.update(segment_id=f"{pipeline.id}:{utt.seq}", start=utt.start / TARGET_RATE)
        # Only a press of the ask button is the wearer for sure; a wake phrase may be anyone.
        overheard = utt is not None and utt.mode != "ask"
        msg = InboundMessage(
            address=Address(DEVICE_CHANNEL, DEVICE_ACCOUNT, pipeline.device.name),
            sender_id=pipeline.device.name,
            message_id=message_id,
            text=text,
            # "Yes" right after a question with buttons is that button's press (the wearer's
            # only: an overheard "yes" presses nothing).
            callback_data=None if overheard else self.choices.take(pipeline.device.name, text),
            received_at=self.clock.now(),
            sender_name=pipeline.device.name,
            overheard=overheard,
            raw=raw,
        )
        await self.on_message(msg)
        return True


def _utterance(seg: AudioSegment) -> Utterance:
    assert seg.id is not None
    return Utterance(seg.id, seg.seq, seg.start_sample, seg.end_sample, seg.mode, seg.spoken_at)
