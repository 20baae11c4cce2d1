"""One device session's pipeline: spool → VAD → utterances → transcription → delivery.

Audio is written to the spool before anything else looks at it. VAD turns the stream into
utterances, each recorded in the database as (start, end) offsets before it is transcribed, so
a crash at any point leaves either un-segmented audio (cut again at start-up) or pending
utterances (transcribed at start-up). Memory stays bounded whatever the transcriber's speed:
queues hold offsets and short texts, never audio.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from bot.clock import Clock
from bot.device import protocol as p
from bot.device.audio import TARGET_RATE, Int16, to_float
from bot.device.spool import Spool, read_samples
from bot.device.utterance import Heard, Typed, Utterance, strip_wake_phrase
from bot.device.vad import Cut
from bot.errors import ChannelError, TranscriptionError
from bot.speech.transcribe import Transcriber, Transcript
from storage.db import Database
from storage.models import DeviceSession
from storage.repos.devices import SessionRepo

if TYPE_CHECKING:
    from bot.device.options import Connection, DeviceInfo, DeviceOptions

log = logging.getLogger(__name__)

CATCH_UP_CHUNK = TARGET_RATE * 30
"""Samples read per step when re-segmenting spooled audio after a restart."""
CURSOR_EVERY = TARGET_RATE * 30
"""Persist the VAD cursor at least this often through long silences."""
SYNC_EVERY_SECONDS = 1.0
PARTIAL_EVERY = TARGET_RATE
"""Samples of new speech between two partial transcripts of the utterance in progress."""
CONTEXT_GAP = int(TARGET_RATE * 2.0)
"""An utterance that starts this soon after the previous one ended is heard in its context."""
CONTEXT_MAX = int(TARGET_RATE * 6.0)
"""At most this much of the previous utterance goes to the model as context. A sentence cut
in two at a pause lost words when each half was transcribed alone (espeak-ng sentences with
a 700 ms pause: "Call the dentist | to move my appointment"); with the speech before it the
model hears the second half as the continuation it is (see ``Transcriber.transcribe_pcm``)."""


class SessionOutcomes(Protocol):
    """Where a session's results go: the device hub records them and asks the dispatcher."""

    async def finish(
        self, utt: Utterance, status: str, text: str, error: str | None = None
    ) -> None:
        """Record the outcome of an utterance."""
        ...

    async def ask(
        self,
        pipeline: SessionPipeline,
        text: str,
        message_id: str,
        *,
        utt: Utterance | None = None,
    ) -> bool:
        """Hand a question to the dispatcher as the device's message (False: revoked)."""
        ...

    async def store_ambient(self, pipeline: SessionPipeline, utt: Utterance, text: str) -> None:
        """Keep an ambient transcript."""
        ...

    async def index_memory(self, user_id: int) -> None:
        """Let memory pick up new ambient transcripts."""
        ...


@dataclass(frozen=True, slots=True)
class SessionDeps:
    """What a session pipeline needs, given once by the device hub (never the hub itself)."""

    db: Database
    clock: Clock
    transcriber: Transcriber
    stt_slots: asyncio.Semaphore
    """Shared by every session: bounds the utterances read into memory and waiting for the
    transcriber (which packs those that wait together into one window)."""
    spool: Spool
    options: DeviceOptions
    """VAD settings (``new_vad``) and the wake phrase."""
    connection: Callable[[str], Connection | None]
    """The device's live connection by device name (it may belong to a newer session)."""
    outcomes: SessionOutcomes


class SessionPipeline:
    """Owns one session's spool file, VAD state and work queues."""

    def __init__(self, deps: SessionDeps, row: DeviceSession, device: DeviceInfo) -> None:
        self.deps = deps
        self.id = row.id
        self.device = device
        self.mode = row.mode
        self.language = row.language
        self.started_at = row.started_at
        self.anchors: list[tuple[int, datetime]] = [
            (int(off), datetime.fromisoformat(str(at))) for off, at in row.anchors or []
        ]
        self.spool = deps.spool.open(row.id)
        self.vad = deps.options.new_vad(row.vad_cursor)
        self.cursor_saved = row.vad_cursor
        self.conn: Connection | None = None
        self.closed = row.closed_at is not None
        self._anchor_due = True
        self._ptt_start: int | None = None
        self._ask_next = False
        self._audio_lock = asyncio.Lock()
        self._heard_ambient = False
        self.next_seq = row.next_seq
        """The ``seq`` the next utterance will get (partials carry its ``segment_id``)."""
        self._guess: tuple[tuple[int, int], asyncio.Task[Transcript | None]] | None = None
        """The likely next utterance (start, end), transcribing before VAD decided it ended."""
        self._early: dict[tuple[int, int], asyncio.Task[Transcript | None]] = {}
        """Guesses that proved right: cut utterances whose transcription already started."""
        self._partial: asyncio.Task[None] | None = None
        self._last_cut: Cut | None = None
        """The latest utterance cut in this session (its audio is context for the next)."""
        self._context: dict[tuple[int, int], int] = {}
        """Cut utterances (start, end) -> where their context begins in the spool."""
        self._partial_at = 0
        self._work = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._todo: asyncio.Queue[Utterance] = asyncio.Queue()
        self._deliver: asyncio.Queue[Heard | Typed] = asyncio.Queue()
        self._tasks = [
            asyncio.create_task(self._transcribe_loop(), name=f"stt-{self.id}"),
            asyncio.create_task(self._deliver_loop(), name=f"deliver-{self.id}"),
        ]

    # --- lifecycle ------------------------------------------------------------------------

    def attach(self, conn: Connection) -> None:
        """A connection now feeds this session; its next audio gets a fresh wall-time anchor."""
        self.conn = conn
        self._anchor_due = True

    async def detach(self, conn: Connection | None = None) -> None:
        """The connection went away: cut the utterance in progress and make the audio durable."""
        if conn is not None and self.conn is not conn:
            return
        self.conn = None
        async with self._audio_lock:
            await self._end_of_stream()

    async def _end_of_stream(self) -> None:
        if self._ptt_start is not None:
            await self._cut(Cut(self._ptt_start, self.spool.samples), contextual=False)
            self._ptt_start = None
        else:
            cut = self.vad.flush()
            if cut is not None:
                await self._cut(cut)
        self.vad.skip_to(self.spool.samples)
        await asyncio.to_thread(self.spool.sync)
        await self._save_cursor(self.vad.safe_cursor)

    async def catch_up(self) -> int:
        """Cut spooled audio that no utterance covers yet (after a crash); return the count."""
        found = 0
        async with self._audio_lock:
            pos, end = self.vad.position, self.spool.samples
            while pos < end:
                upto = min(end, pos + CATCH_UP_CHUNK)
                chunk = await asyncio.to_thread(read_samples, self.spool.path, pos, upto)
                events = await asyncio.to_thread(self.vad.feed, chunk)
                for cut in events.cuts or []:
                    await self._cut(cut)
                    found += 1
                pos = upto
            last = self.vad.flush()
            if last is not None:
                await self._cut(last)
                found += 1
            self.vad.skip_to(end)
            await self._save_cursor(end)
        return found

    def enqueue(self, rows: list[Utterance]) -> None:
        """Queue utterances recorded earlier (recovery)."""
        for row in rows:
            self._queue(row)

    @property
    def busy(self) -> bool:
        """True while any utterance or question is waiting or being worked on."""
        return self._work > 0

    async def drain(self) -> None:
        """Wait until every queued utterance is transcribed and delivered."""
        await self._idle.wait()

    def _queue(self, item: Utterance | Heard | Typed) -> None:
        self._work += 1
        self._idle.clear()
        if isinstance(item, Utterance):
            self._todo.put_nowait(item)
        else:
            self._deliver.put_nowait(item)

    def _done(self) -> None:
        self._work -= 1
        if self._work == 0:
            self._idle.set()

    async def stop(self) -> None:
        """Cancel the workers and close the file; unfinished work stays pending on disk."""
        extra = [*self._early.values(), *([self._partial] if self._partial else [])]
        if self._guess is not None:
            extra.append(self._guess[1])
        for task in [*self._tasks, *extra]:
            task.cancel()
        await asyncio.gather(*self._tasks, *extra, return_exceptions=True)
        await asyncio.to_thread(self.spool.close)

    # --- input ------------------------------------------------------------------------------

    async def add_audio(self, pcm: Int16, ends_at: datetime | None = None) -> None:
        """Spool decoded audio, then run VAD over it.

        ``ends_at``: when this audio ended, if known (an Omi chunk's arrival, which may be long
        before it is fed after a restart); otherwise now.
        """
        if pcm.size == 0:
            return
        if self.deps.spool.full:
            # At the disk cap with nothing transcribed left to delete: keep what is stored.
            raise OSError(errno.ENOSPC, "the audio spool reached LIFEBOT_DEVICE_SPOOL_MAX_MB")
        async with self._audio_lock:
            if self._anchor_due:
                # The first audio of a connection: pin its wall time (for ambient timestamps).
                end = ends_at or self.deps.clock.now()
                spoken = end - timedelta(seconds=pcm.size / TARGET_RATE)
                self.anchors.append((self.spool.samples, spoken))
                self._anchor_due = False
                await self._save_anchors()
            self.spool.append(pcm)
            if self.spool.unsynced_seconds >= SYNC_EVERY_SECONDS:
                await asyncio.to_thread(self.spool.sync)
            if self._ptt_start is not None:
                return  # push-to-talk: the utterance ends at audio-stop, not at a pause
            samples = to_float(pcm)
            # Silero takes ~0.05 ms per 32 ms window; still, model inference stays off the loop.
            events = await asyncio.to_thread(self.vad.feed, samples)
            if events.speech_started:
                await self.send_quietly(p.Vad("speech"))
            if events.likely_end is not None:
                self._transcribe_early(events.likely_end)
            for cut in events.cuts or []:
                await self._cut(cut)
            if events.speech_ended:
                await self.send_quietly(p.Vad("silence"))
            if events.speaking is not None and not events.cuts:
                self._maybe_partial(events.speaking)
            if self.vad.safe_cursor - self.cursor_saved >= CURSOR_EVERY:
                await self._save_cursor(self.vad.safe_cursor)

    async def push_to_talk(self, *, start: bool) -> None:
        """``audio-start`` / ``audio-stop``: bracket one utterance explicitly."""
        async with self._audio_lock:
            if start:
                if self._ptt_start is None:
                    cut = self.vad.flush()  # speech VAD had open belongs before the button
                    if cut is not None:
                        await self._cut(cut)
                    self._ptt_start = self.spool.samples
                    await self.send_quietly(p.Vad("speech"))
                return
            if self._ptt_start is None:
                await self.send_quietly(
                    p.Error("not_recording", "audio-stop without audio-start was ignored")
                )
                return
            await self._cut(Cut(self._ptt_start, self.spool.samples), contextual=False)
            self._ptt_start = None
            self.vad.skip_to(self.spool.samples)
            await self.send_quietly(p.Vad("silence"))

    async def set_mode(self, mode: str) -> None:
        """Switch ask/ambient for the utterances cut from now on."""
        self.mode = mode
        async with self.deps.db.session() as s:
            row = await SessionRepo(s).get(self.id)
            if row is not None:
                row.mode = mode
                s.add(row)

    def ask_typed(self, text: str, client_id: str) -> None:
        """Queue a typed question behind the spoken ones."""
        self._queue(Typed(text, client_id))

    # --- utterances -------------------------------------------------------------------------

    def wall_time(self, sample: int) -> datetime:
        """When the audio at ``sample`` was spoken."""
        base_off, base_at = 0, self.started_at
        for off, at in self.anchors:
            if off <= sample:
                base_off, base_at = off, at
        return base_at + timedelta(seconds=(sample - base_off) / TARGET_RATE)

    async def _cut(self, cut: Cut, *, contextual: bool = True) -> None:
        """Record an utterance and queue it.

        ``contextual``: it may be heard after the last one (not for push-to-talk: the button
        starts a new question, and the audio before it in the spool may be from minutes ago).
        """
        if cut.end <= cut.start:
            return
        async with self.deps.db.session() as s:
            repo = SessionRepo(s)
            row = await repo.get(self.id)
            assert row is not None
            seg = await repo.add_segment(
                row, cut.start, cut.end, self.mode, self.wall_time(cut.start)
            )
            assert seg.id is not None
            utt = Utterance(seg.id, seg.seq, cut.start, cut.end, seg.mode, seg.spoken_at)
        self.next_seq = max(self.next_seq, seg.seq + 1)
        context = self._context_start(cut.start) if contextual else cut.start
        self._context[(cut.start, cut.end)] = context
        self._last_cut = cut
        if self._guess is not None:
            key, task = self._guess
            self._guess = None
            if key == (cut.start, cut.end):
                self._early[key] = task
            else:
                task.cancel()
        if self._partial is not None:
            self._partial.cancel()  # the final follows; a late partial would only confuse
            self._partial = None
        self._partial_at = 0
        self.cursor_saved = max(self.cursor_saved, cut.end)
        self._queue(utt)
        # An empty partial announces the utterance: the device knows a final will follow.
        await self.send_quietly(self._transcript_frame(utt, "", final=False))

    def _context_start(self, start: int) -> int:
        """Where the context of an utterance starting at ``start`` begins (``start``: none)."""
        prev = self._last_cut
        if prev is None or prev.end > start or start - prev.end > CONTEXT_GAP:
            return start
        return max(prev.start, start - CONTEXT_MAX)

    async def _save_cursor(self, cursor: int) -> None:
        if cursor <= self.cursor_saved:
            return
        async with self.deps.db.session() as s:
            row = await SessionRepo(s).get(self.id)
            if row is not None:
                row.vad_cursor = max(row.vad_cursor, cursor)
                row.last_seen_at = self.deps.clock.now()
                s.add(row)
        self.cursor_saved = cursor

    async def _save_anchors(self) -> None:
        async with self.deps.db.session() as s:
            row = await SessionRepo(s).get(self.id)
            if row is not None:
                row.anchors = [[off, at.isoformat()] for off, at in self.anchors[-50:]]
                row.last_seen_at = self.deps.clock.now()
                s.add(row)

    def _transcript_frame(
        self, utt: Utterance, text: str, *, final: bool, question: bool = False
    ) -> p.Transcript:
        return p.Transcript(
            text,
            final=final,
            segment_id=f"{self.id}:{utt.seq}",
            start=round(utt.start / TARGET_RATE, 3),
            end=round(utt.end / TARGET_RATE, 3),
            question=question,
        )

    async def send_quietly(self, frame: p.Frame) -> None:
        """Tell the device, if it is connected; a gone device is not an error here.

        Frames go to the device's current connection, which may belong to a newer session
        (after a rollover or reconnect): late transcripts of the old session still arrive.
        """
        conn = self.deps.connection(self.device.name)
        if conn is None:
            return
        try:
            await conn.send(frame)
        except ChannelError:
            log.debug("device %s left before a %s frame", self.device.name, frame.type)

    # --- optional work while the model is idle ----------------------------------------------

    def _transcribe_early(self, cut: Cut) -> None:
        """Start on the utterance VAD will most likely cut, during the silence that ends it.

        VAD must hear ``LIFEBOT_DEVICE_VAD_SILENCE_MS`` of silence before it ends an utterance;
        the audio of that utterance is known once the padding after the speech is in, so its
        transcript is usually ready when the cut comes. If speech resumes the guess is dropped.
        Only when the model is idle: under load this would take turns from real utterances.
        """
        if self._guess is not None:
            self._guess[1].cancel()  # speech came back after the last guess
            self._guess = None
        if not self.deps.options.early_final or not self.deps.transcriber.idle:
            return
        task = asyncio.create_task(
            self._read_and_speculate(cut.start, cut.end, self._context_start(cut.start)),
            name=f"stt-early-{self.id}",
        )
        self._guess = ((cut.start, cut.end), task)

    def _maybe_partial(self, speaking: Cut) -> None:
        """Every second of speech, a partial transcript of the utterance so far (if idle)."""
        if not self.deps.options.partials or self.conn is None or self.vad.in_silence:
            return  # in a pause the utterance may be about to end: leave the model to its final
        if speaking.end - max(self._partial_at, speaking.start) < PARTIAL_EVERY:
            return
        if self._partial is not None and not self._partial.done():
            return
        if not self.deps.transcriber.idle:
            return
        self._partial_at = speaking.end
        self._partial = asyncio.create_task(self._send_partial(speaking), name=f"partial-{self.id}")

    async def _send_partial(self, speaking: Cut) -> None:
        seq = self.next_seq
        try:
            heard = await self._read_and_speculate(
                speaking.start, speaking.end, self._context_start(speaking.start)
            )
        except TranscriptionError:
            return  # a partial is a courtesy; the final will report a real failure
        if heard is not None and heard.text.strip() and self.next_seq == seq:
            frame = p.Transcript(
                heard.text.strip(),
                final=False,
                segment_id=f"{self.id}:{seq}",
                start=round(speaking.start / TARGET_RATE, 3),
                end=round(speaking.end / TARGET_RATE, 3),
            )
            await self.send_quietly(frame)

    async def _read_and_transcribe(self, start: int, end: int, context: int) -> Transcript:
        async with self.deps.stt_slots:
            audio = await asyncio.to_thread(read_samples, self.spool.path, context, end)
            return await self.deps.transcriber.transcribe_pcm(
                audio, language=self.language, lead=start - context
            )

    async def _read_and_speculate(self, start: int, end: int, context: int) -> Transcript | None:
        """Optional work: None when the model was busy (a final always goes first)."""
        if not self.deps.transcriber.idle:
            return None
        audio = await asyncio.to_thread(read_samples, self.spool.path, context, end)
        return await self.deps.transcriber.speculate(
            audio, language=self.language, lead=start - context
        )

    # --- workers ----------------------------------------------------------------------------

    async def _transcribe_loop(self) -> None:
        while True:
            utt = await self._todo.get()
            try:
                await self._transcribe(utt)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transcribing %s:%s failed", self.id, utt.seq)
            finally:
                self._done()

    async def _transcribe(self, utt: Utterance) -> None:
        early = self._early.pop((utt.start, utt.end), None)
        context = self._context.pop((utt.start, utt.end), utt.start)
        try:
            guessed = None
            if early is not None and not early.cancelled():
                guessed = await early  # started during the silence that ended it
            # None: the guess never ran (the model got busy): transcribe it now.
            heard = guessed or await self._read_and_transcribe(utt.start, utt.end, context)
        except TranscriptionError as exc:
            log.warning("could not transcribe %s:%s: %s", self.id, utt.seq, exc)
            await self.deps.outcomes.finish(utt, "failed", "", str(exc))
            await self.send_quietly(
                p.Error("transcription_failed", f"utterance {utt.seq} kept for a retry")
            )
            return
        item = self._route(utt, heard.text.strip())
        await self.send_quietly(
            self._transcript_frame(utt, item.text, final=True, question=item.route == "ask")
        )
        self._queue(item)

    async def _deliver_loop(self) -> None:
        while True:
            item = await self._deliver.get()
            try:
                if isinstance(item, Typed):
                    message_id = f"{self.id}:text:{item.client_id}"
                    await self.deps.outcomes.ask(self, item.text, message_id)
                else:
                    await self._deliver_heard(item)
                if self._deliver.qsize() == 0 and self._heard_ambient:
                    self._heard_ambient = False
                    await self.deps.outcomes.index_memory(self.device.user_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delivering a transcript of session %s failed", self.id)
            finally:
                self._done()

    def _route(self, utt: Utterance, text: str) -> Heard:
        """Decide what an utterance is for; the wake phrase turns ambient speech into asking."""
        if not text:
            return Heard(utt, text, "empty")
        if utt.mode == "ask":
            return Heard(utt, text, "ask", text)
        rest = strip_wake_phrase(text, self.deps.options.wake_phrase)
        if rest == "":
            self._ask_next = True  # the phrase alone: the next utterance is the question
            return Heard(utt, text, "wake")
        ask_next, self._ask_next = self._ask_next, False
        if rest is not None:
            return Heard(utt, text, "ask", rest)
        if ask_next:
            return Heard(utt, text, "ask", text)
        return Heard(utt, text, "ambient")

    async def _deliver_heard(self, item: Heard) -> None:
        utt = item.utterance
        if item.route == "empty":
            await self.deps.outcomes.finish(utt, "empty", "")
        elif item.route == "wake":
            await self.deps.outcomes.finish(utt, "done", item.text)
        elif item.route == "ask":
            if await self.deps.outcomes.ask(self, item.question, f"{self.id}:{utt.seq}", utt=utt):
                await self.deps.outcomes.finish(utt, "done", item.text)
            else:
                await self.deps.outcomes.finish(utt, "revoked", "")
        else:
            await self.deps.outcomes.store_ambient(self, utt, item.text)
            self._heard_ambient = True
