"""One Home Assistant connection to the Wyoming service: asr, handle and tts, streaming.

The event flows, as the ``wyoming`` package (1.10) documents them and Home Assistant's
integration drives them:

* asr: ``transcribe``, ``audio-start``, ``audio-chunk``… ``audio-stop`` → ``transcript-start``,
  ``transcript-chunk``… (sent while the audio still arrives, as words firm up), then after
  ``audio-stop`` the final ``transcript`` (which clients without streaming read) and
  ``transcript-stop``.
* handle: ``transcript`` → ``handled-start``, ``handled-chunk``… (as lifebot's answer is
  written), ``handled`` with the whole answer, ``handled-stop``; or ``not-handled``.
* tts: ``synthesize-start``, ``synthesize-chunk``… → each finished sentence is spoken at once
  (``audio-start``, ``audio-chunk``…, ``audio-stop``); the ``synthesize`` copy of the whole text
  that Home Assistant sends inside the stream is ignored; ``synthesize-stop`` → the rest, then
  ``synthesize-stopped``. A lone ``synthesize`` is answered with one audio stream.

Every declared length is checked before it is read (``wyoming_wire``); an over-long event is
answered with an ``error`` event and the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.handle import Handled, HandledChunk, HandledStart, HandledStop, NotHandled
from wyoming.info import Describe
from wyoming.server import AsyncEventHandler
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from bot.device.audio import TARGET_RATE, Decoder, Int16, to_float
from bot.device.protocol import ProtocolError
from bot.device.wyoming_wire import BadEvent, EventTooLarge, read_event
from bot.errors import ChannelError, SynthesisError, TranscriptionError
from bot.speech.synthesize import sentences, spoken_text
from bot.speech.transcribe import Transcript as Heard

if TYPE_CHECKING:
    from bot.device.wyoming import WyomingService

log = logging.getLogger(__name__)

MAX_SECONDS = 60.0
"""Longest audio one ``transcribe`` may send; Home Assistant's commands are a few seconds."""
CHUNK_SAMPLES = 1024
"""Samples per ``audio-chunk`` of synthesized speech."""
PARTIAL_EVERY = TARGET_RATE
"""Samples of new audio between two partial transcriptions (only while the model is idle)."""
MAX_SYNTHESIS_TEXT = 20_000
"""Characters of text one streamed synthesis may collect."""
_WORD = re.compile(r"[\w']+")


def _norm(word: str) -> str:
    return "".join(_WORD.findall(word.lower()))


def _agreed(previous: list[str], current: list[str]) -> list[str]:
    """The words two successive partials agree on, from the start (they have firmed up)."""
    out: list[str] = []
    for a, b in zip(previous, current, strict=False):
        if _norm(a) != _norm(b):
            break
        out.append(b)
    return out


class WyomingHandler(AsyncEventHandler):
    """One connection: a ladder of event types, with the state of a streaming request."""

    def __init__(
        self,
        service: WyomingService,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        super().__init__(reader, writer)
        self.service = service
        self._write_lock = asyncio.Lock()
        # asr
        self.language: str | None = None
        self.context: dict[str, Any] | None = None
        self.decoder: Decoder | None = None
        self.audio: list[Int16] = []
        self.samples = 0
        self._partial: asyncio.Task[None] | None = None
        self._partial_at = 0
        self._last_partial: list[str] = []
        self._firm: list[str] = []
        """Words already sent as transcript chunks."""
        self._transcript_started = False
        # tts
        self._tts_stream = False
        self._tts_text = ""
        self._tts_voice: str | None = None

    async def run(self) -> None:
        """Receive events (with bounded sizes) until the client leaves or one is refused."""
        try:
            while True:
                try:
                    event = await read_event(self.reader)
                except EventTooLarge as exc:
                    log.warning("Wyoming: refused an event: %s", exc)
                    await self.write_event(Error(text=f"Refused: {exc}.", code="too-large").event())
                    break
                except BadEvent as exc:
                    await self.write_event(Error(text=f"Refused: {exc}.", code="bad-event").event())
                    break
                if event is None or not await self.handle_event(event):
                    break
        except (ConnectionError, ChannelError):
            pass  # the client left
        finally:
            await self.disconnect()
            self.writer.close()

    async def disconnect(self) -> None:
        """The connection ends: a partial still running is not wanted any more."""
        if self._partial is not None:
            self._partial.cancel()

    async def write_event(self, event: Event) -> None:
        """Send one event (the partial task and the request share the connection)."""
        async with self._write_lock:
            await super().write_event(event)

    async def handle_event(self, event: Event) -> bool:
        """One event in; False ends the connection."""
        kind = event.type
        if Describe.is_type(kind):
            await self.write_event(self.service.info().event())
        elif Transcribe.is_type(kind):
            request = Transcribe.from_event(event)
            self.language, self.context = request.language, request.context
        elif AudioStart.is_type(kind):
            return await self._audio_start(AudioStart.from_event(event))
        elif AudioChunk.is_type(kind):
            self._audio_chunk(AudioChunk.from_event(event))
        elif AudioStop.is_type(kind):
            await self._transcribe()
        elif Transcript.is_type(kind):
            await self._handle(Transcript.from_event(event))
        elif SynthesizeStart.is_type(kind):
            start = SynthesizeStart.from_event(event)
            self._tts_stream, self._tts_text = True, ""
            self._tts_voice = start.voice.name if start.voice else None
        elif SynthesizeChunk.is_type(kind):
            await self._synthesize_chunk(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(kind):
            await self._synthesize_stop()
        elif Synthesize.is_type(kind):
            if not self._tts_stream:  # inside a stream it is a copy of the chunks: ignored
                return await self._synthesize(Synthesize.from_event(event).text)
        else:
            log.debug("Wyoming: ignored a %s event", kind)
        return True

    # --- asr ----------------------------------------------------------------------------

    async def _audio_start(self, start: AudioStart) -> bool:
        problem = "send 16-bit audio (width 2)" if start.width != 2 else None
        if problem is None:
            try:
                self.decoder = Decoder("pcm16", start.rate, start.channels)
            except ProtocolError as exc:
                problem = exc.message
        if problem is not None:
            # Home Assistant reads only a transcript: an empty one, and the reason in the log.
            log.warning("Wyoming: refused audio: %s", problem)
            await self.write_event(Transcript(text="").event())
            return False
        self.audio, self.samples, self._partial_at = [], 0, 0
        self._last_partial, self._firm, self._transcript_started = [], [], False
        return True

    def _audio_chunk(self, chunk: AudioChunk) -> None:
        if self.decoder is None or self.samples >= MAX_SECONDS * TARGET_RATE:
            return  # no audio-start yet, or past the limit: the rest is not kept
        pcm = self.decoder.decode(chunk.audio)
        self.audio.append(pcm)
        self.samples += int(pcm.size)
        self._maybe_partial()

    def _speech(self) -> Any:
        return self.service.transcriber.for_user(f"wyoming:{self.service.sender_for(self.context)}")

    def _maybe_partial(self) -> None:
        """Every second of new audio, a partial transcription (only while the model is idle)."""
        if self.samples - self._partial_at < PARTIAL_EVERY:
            return
        if self._partial is not None and not self._partial.done():
            return
        speech = self._speech()
        if not speech.idle:
            return
        self._partial_at = self.samples
        pcm = np.concatenate(self.audio)
        self._partial = asyncio.create_task(self._send_partial(speech, pcm), name="wyoming-partial")

    async def _send_partial(self, speech: Any, pcm: Int16) -> None:
        try:
            heard: Heard | None = await speech.speculate(to_float(pcm), language=self.language)
        except TranscriptionError:
            return  # a partial is a courtesy; the final reports a real failure
        if heard is None or self.decoder is None:
            return  # the model was busy, or the audio ended meanwhile
        words = heard.text.split()
        # A word is sent once two partials in a row agree on it: the last words of a partial
        # may still change as more audio comes (and the very last may be cut mid-word).
        agreed = _agreed(self._last_partial, words)
        self._last_partial = words
        if len(agreed) <= len(self._firm) or not self._extends_firm(agreed):
            return  # nothing new, or the model changed its mind about words already sent
        await self._chunk(agreed[len(self._firm) :])

    def _extends_firm(self, words: list[str]) -> bool:
        """Whether ``words`` begin with the words already sent."""
        return len(_agreed(self._firm, words)) == len(self._firm)

    async def _chunk(self, words: list[str]) -> None:
        """Send ``words`` as the next transcript chunk (chunks join into the transcript)."""
        if not words:
            return
        if not self._transcript_started:
            self._transcript_started = True
            await self.write_event(TranscriptStart(language=self.language).event())
        text = " ".join(
            w.strip(",.;:!?") if i == len(words) - 1 else w for i, w in enumerate(words)
        )
        await self.write_event(TranscriptChunk(text=(" " if self._firm else "") + text).event())
        self._firm += words

    async def _transcribe(self) -> None:
        if self._partial is not None:
            self._partial.cancel()  # the final goes first; a partial now would only confuse
            self._partial = None
        if self.decoder is not None:
            self.audio.append(self.decoder.flush())
        pcm = np.concatenate(self.audio) if self.audio else np.zeros(0, dtype=np.int16)
        self.audio, self.samples, self.decoder = [], 0, None
        text = ""
        if pcm.size:
            try:
                heard = await self._speech().transcribe_pcm(to_float(pcm), language=self.language)
                text = heard.text.strip()
            except TranscriptionError as exc:
                log.warning("Wyoming: could not transcribe: %s", exc)
        words = text.split()
        # Words already sent cannot be taken back: if the final heard them otherwise, the
        # rest still follows in place (the transcript event has the exact text).
        rest = words[len(self._firm) :]
        if not self._transcript_started:
            self._transcript_started = True
            await self.write_event(TranscriptStart(language=self.language).event())
        if rest:
            joined = " ".join(rest)
            await self.write_event(
                TranscriptChunk(text=(" " if self._firm else "") + joined).event()
            )
        await self.write_event(Transcript(text=text, language=self.language).event())
        await self.write_event(TranscriptStop().event())
        self._firm, self._last_partial, self._transcript_started = [], [], False

    # --- handle -------------------------------------------------------------------------

    async def _handle(self, transcript: Transcript) -> None:
        text = transcript.text.strip()
        if not text:
            await self.write_event(NotHandled(text="I did not hear a question.").event())
            return
        stream = HandledStream(self, transcript.context)
        reply = await self.service.ask(text, transcript.context, stream)
        if reply is None:
            await self.write_event(
                NotHandled(text="lifebot could not answer that right now.").event()
            )
            return
        await stream.close(reply)

    # --- tts ----------------------------------------------------------------------------

    async def _synthesize_chunk(self, text: str) -> None:
        if not self._tts_stream:
            return  # a chunk without synthesize-start
        if len(self._tts_text) + len(text) > MAX_SYNTHESIS_TEXT:
            log.warning("Wyoming: a streamed synthesis passed %d characters", MAX_SYNTHESIS_TEXT)
            return
        self._tts_text += text
        pieces = sentences(self._tts_text)
        if len(pieces) > 1:
            # Every piece but the last is a finished sentence; the last may still grow.
            self._tts_text = pieces[-1]
            for piece in pieces[:-1]:
                await self._speak(piece)

    async def _synthesize_stop(self) -> None:
        if self._tts_stream:
            for piece in sentences(self._tts_text):
                await self._speak(piece)
        self._tts_stream, self._tts_text = False, ""
        await self.write_event(SynthesizeStopped().event())

    async def _speak(self, text: str) -> str | None:
        """One sentence as one audio stream (start, chunks, stop); else why nothing was sent."""
        synth = self.service.synthesizer
        said = spoken_text(text)
        if synth is None:
            return "speech output is off"
        if not said:
            return "there are no words to speak"
        try:
            speech = await synth.synthesize(said)
        except SynthesisError as exc:
            log.warning("Wyoming: could not synthesize: %s", exc)
            return "the speech engine failed (the log says why)"
        fmt = {"rate": speech.rate, "width": 2, "channels": 1}
        await self.write_event(AudioStart(**fmt).event())
        raw = speech.samples.astype("<i2").tobytes()
        step = CHUNK_SAMPLES * 2
        for i in range(0, len(raw), step):
            await self.write_event(AudioChunk(audio=raw[i : i + step], **fmt).event())
        await self.write_event(AudioStop().event())
        return None

    async def _synthesize(self, text: str) -> bool:
        """A one-shot ``synthesize``: the whole text as one audio stream; False ends it.

        Home Assistant reads until ``audio-stop`` or the end of the connection: when no audio
        can be made it gets an ``error`` and the connection ends, or it would wait for good.
        """
        problem = await self._speak(text)
        if problem is None:
            return True
        log.warning("Wyoming: synthesize asked, but %s", problem)
        await self.write_event(Error(text=f"No speech: {problem}.", code="no-speech").event())
        return False


class HandledStream:
    """lifebot's answer to one ``transcript``, streamed as handled chunks while it is written.

    The dispatcher sees it as the reply stream of the question's message (see
    ``WyomingService.open_stream``).
    """

    def __init__(self, handler: WyomingHandler, context: dict[str, Any] | None) -> None:
        self.handler = handler
        self.context = context
        self.message_id = uuid.uuid4().hex
        """The id of the question's message: the dispatcher streams the answer to it."""
        self._started = False
        self._sent = ""
        self._gone = False

    async def _start(self) -> None:
        if not self._started:
            self._started = True
            await self.handler.write_event(HandledStart(context=self.context).event())

    async def delta(self, text: str) -> None:
        """More of the answer (Home Assistant hanging up does not stop the turn)."""
        if not text or self._gone:
            return
        try:
            await self._start()
            await self.handler.write_event(HandledChunk(text=text).event())
        except (ConnectionError, OSError):
            self._gone = True  # the answer is still stored; nobody is listening here
            return
        self._sent += text

    async def close(self, reply: str) -> None:
        """The whole answer: the rest as a last chunk, then ``handled`` and ``handled-stop``."""
        await self._start()
        if reply.startswith(self._sent) and len(reply) > len(self._sent):
            await self.handler.write_event(HandledChunk(text=reply[len(self._sent) :]).event())
        await self.handler.write_event(Handled(text=reply, context=self.context).event())
        await self.handler.write_event(HandledStop().event())
