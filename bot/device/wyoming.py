"""A Wyoming service for Home Assistant: speech to text, lifebot's agent, and speech out.

Home Assistant's ``wyoming`` integration opens one TCP connection per request and speaks the
``wyoming`` package's events (newline-delimited JSON headers, binary payloads):

* ``describe`` → ``info``: exactly what is offered (``asr`` and ``handle``; ``tts`` only when a
  synthesizer is configured). Streaming transcripts and streaming handling are not offered.
* ``transcribe``, ``audio-start``, ``audio-chunk``…, ``audio-stop`` → ``transcript``.
* ``transcript`` (the ``handle`` domain) → ``handled`` with lifebot's answer, or
  ``not-handled`` with a plain reason.
* ``synthesize`` → ``audio-start``, ``audio-chunk``…, ``audio-stop``.

Wyoming has no authentication and names no user: the service listens on loopback unless told
otherwise, and every request is taken as one configured lifebot user's (optionally another
user per ``satellite_id``). The audio of an ``asr`` request is transcribed straight away and not
spooled: Home Assistant waits on that very connection, and nobody could receive a transcript
finished after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.handle import Handled, NotHandled
from wyoming.info import (
    AsrModel,
    AsrProgram,
    Attribution,
    Describe,
    HandleModel,
    HandleProgram,
    Info,
    TtsProgram,
    TtsVoice,
)
from wyoming.server import AsyncEventHandler, AsyncTcpServer
from wyoming.tts import Synthesize

from bot.adapters.base import MessageHandler
from bot.clock import Clock
from bot.device.audio import TARGET_RATE, Decoder, Int16, to_float
from bot.device.protocol import ProtocolError
from bot.errors import ConfigError, SynthesisError, TranscriptionError
from bot.messages import Address, InboundMessage, OutboundMessage, Receipt
from bot.speech.fair import FairTranscriber
from bot.speech.synthesize import Synthesizer
from storage.db import Database
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

WYOMING_CHANNEL = "wyoming"
WYOMING_ACCOUNT = "default"
DEFAULT_SENDER = "home-assistant"
MAX_SECONDS = 60.0
"""Longest audio one ``transcribe`` may send; Home Assistant's commands are a few seconds."""
CHUNK_SAMPLES = 1024
"""Samples per ``audio-chunk`` of synthesized speech."""
_ATTRIBUTION = Attribution(name="lifebot", url="https://github.com/")


@dataclass(frozen=True, slots=True)
class WyomingOptions:
    """Where to listen and whose requests these are (``LIFEBOT_WYOMING_*``)."""

    host: str = "127.0.0.1"
    port: int = 10800
    user: str = ""
    """The lifebot user (id or name) every request belongs to."""
    satellites: dict[str, str] = field(default_factory=dict)
    """``satellite_id`` → user (id or name), for households with several people."""
    trusted: bool = False
    """False: answers never change anything (anyone near a satellite may speak)."""
    model: str = "tiny.en"
    """The speech model's name, as ``info`` reports it."""

    @staticmethod
    def parse_satellites(raw: str) -> dict[str, str]:
        """``kitchen=alice,office=2`` → {"kitchen": "alice", "office": "2"}; ConfigError if bad."""
        out: dict[str, str] = {}
        for part in (p.strip() for p in raw.split(",")):
            if not part:
                continue
            sat, sep, who = part.partition("=")
            if not sep or not sat.strip() or not who.strip():
                raise ConfigError(
                    [f"LIFEBOT_WYOMING_SATELLITES: {part!r} is not satellite_id=user"]
                )
            out[sat.strip()] = who.strip()
        return out


class WyomingService:
    """The ``wyoming`` channel: a TCP server whose handlers ask the dispatcher."""

    name = WYOMING_CHANNEL

    def __init__(
        self,
        options: WyomingOptions,
        *,
        db: Database,
        clock: Clock,
        transcriber: FairTranscriber,
        synthesizer: Synthesizer | None = None,
    ) -> None:
        self.options = options
        self.db = db
        self.clock = clock
        self.transcriber = transcriber
        self.synthesizer = synthesizer
        self.on_message: MessageHandler | None = None
        self._server: AsyncTcpServer | None = None
        self._senders: dict[str, str] = {}
        """satellite_id → the sender id its user's identity carries."""

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful when configured as 0)."""
        assert self._server is not None
        server = self._server._server  # the asyncio server inside; wyoming has no accessor
        assert isinstance(server, asyncio.Server)
        sock = next(iter(server.sockets))
        return int(sock.getsockname()[1])

    async def start(self, on_message: MessageHandler) -> None:
        """Link the configured users to this channel, then listen."""
        self.on_message = on_message
        await self._link(DEFAULT_SENDER, self.options.user)
        for sat, who in self.options.satellites.items():
            sender = f"satellite:{sat}"
            await self._link(sender, who)
            self._senders[sat] = sender
        self._server = AsyncTcpServer(self.options.host, self.options.port)
        await self._server.start(lambda r, w: _Handler(self, r, w))
        log.info(
            "Wyoming service on tcp://%s:%s (no authentication: anyone who reaches it may use it)",
            self.options.host,
            self.bound_port,
        )

    async def _link(self, sender: str, who: str) -> None:
        """Make ``sender`` an identity of the user ``who`` (never a target of pushes)."""
        if not who:
            raise ConfigError(["LIFEBOT_WYOMING_USER must name the lifebot user it speaks for"])
        async with self.db.session() as s:
            users = UserRepo(s)
            user = await users.find_by_name(who)
            if user is None or user.id is None:
                raise ConfigError([f"Wyoming: no lifebot user {who!r}; `lifebot users` lists them"])
            ident = await users.find_identity(WYOMING_CHANNEL, WYOMING_ACCOUNT, sender)
            if ident is not None and ident.user_id != user.id:
                await s.delete(ident)  # the setting changed hands: the new owner holds it
                await s.flush()
                ident = None
            if ident is None:
                # No chat id: scheduled pushes never go to a speaker that cannot be reached.
                await users.add_identity(user.id, WYOMING_CHANNEL, WYOMING_ACCOUNT, sender)

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            await self._server.stop()
            self._server = None

    async def send(self, msg: OutboundMessage) -> Receipt:
        """The answer goes back on the request's own connection (see ``ask``); nothing to do."""
        return Receipt(self.name, f"w{uuid.uuid4().hex[:12]}", msg.address.chat_id)

    def info(self) -> Info:
        """What this service offers, and nothing more."""
        asr = AsrProgram(
            name="lifebot-asr",
            attribution=_ATTRIBUTION,
            installed=True,
            description="lifebot speech to text (faster-whisper, local)",
            version=None,
            models=[
                AsrModel(
                    name=self.options.model,
                    attribution=_ATTRIBUTION,
                    installed=True,
                    description=f"Whisper {self.options.model}",
                    version=None,
                    languages=["en"],
                )
            ],
            supports_transcript_streaming=False,
        )
        handle = HandleProgram(
            name="lifebot",
            attribution=_ATTRIBUTION,
            installed=True,
            description="lifebot's agent answers the question",
            version=None,
            models=[
                HandleModel(
                    name="lifebot",
                    attribution=_ATTRIBUTION,
                    installed=True,
                    description="lifebot",
                    version=None,
                    languages=["en"],
                )
            ],
            supports_handled_streaming=False,
        )
        tts: list[TtsProgram] = []
        if self.synthesizer is not None:
            voice = TtsVoice(
                name=self.synthesizer.voice,
                attribution=_ATTRIBUTION,
                installed=True,
                description=f"{self.synthesizer.engine} {self.synthesizer.voice}",
                version=None,
                languages=["en"],
            )
            tts.append(
                TtsProgram(
                    name=f"lifebot-{self.synthesizer.engine}",
                    attribution=_ATTRIBUTION,
                    installed=True,
                    description=f"lifebot speech output ({self.synthesizer.engine}, local)",
                    version=None,
                    voices=[voice],
                    supports_synthesize_streaming=False,
                )
            )
        return Info(asr=[asr], handle=[handle], tts=tts)

    def sender_for(self, context: dict[str, Any] | None) -> str:
        """The identity a request speaks as: its satellite's user, else the configured user."""
        sat = str((context or {}).get("satellite_id") or "")
        return self._senders.get(sat, DEFAULT_SENDER)

    async def ask(self, text: str, context: dict[str, Any] | None) -> str | None:
        """Hand a question to the dispatcher; its answer text (None: not answered)."""
        if self.on_message is None:
            return None
        sender = self.sender_for(context)
        msg = InboundMessage(
            address=Address(WYOMING_CHANNEL, WYOMING_ACCOUNT, sender),
            sender_id=sender,
            message_id=uuid.uuid4().hex,
            text=text,
            received_at=self.clock.now(),
            sender_name="Home Assistant",
            private=False,  # never becomes the place scheduled pushes go
            overheard=not self.options.trusted,
            raw={"context": context or {}},
        )
        result = await self.on_message(msg)
        reply = getattr(result, "reply", None)
        return str(reply) if reply else None


class _Handler(AsyncEventHandler):
    """One Home Assistant connection: a flat ladder of event types."""

    def __init__(
        self,
        service: WyomingService,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        super().__init__(reader, writer)
        self.service = service
        self.language: str | None = None
        self.context: dict[str, Any] | None = None
        self.decoder: Decoder | None = None
        self.audio: list[Int16] = []
        self.samples = 0

    async def handle_event(self, event: Event) -> bool:
        """One event in; False ends the connection."""
        if Describe.is_type(event.type):
            await self.write_event(self.service.info().event())
        elif Transcribe.is_type(event.type):
            request = Transcribe.from_event(event)
            self.language, self.context = request.language, request.context
        elif AudioStart.is_type(event.type):
            return await self._audio_start(AudioStart.from_event(event))
        elif AudioChunk.is_type(event.type):
            self._audio_chunk(AudioChunk.from_event(event))
        elif AudioStop.is_type(event.type):
            await self._transcribe()
        elif Transcript.is_type(event.type):
            await self._handle(Transcript.from_event(event))
        elif Synthesize.is_type(event.type):
            await self._synthesize(Synthesize.from_event(event))
        else:
            log.debug("Wyoming: ignored a %s event", event.type)
        return True

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
        self.audio, self.samples = [], 0
        return True

    def _audio_chunk(self, chunk: AudioChunk) -> None:
        if self.decoder is None or self.samples >= MAX_SECONDS * TARGET_RATE:
            return  # no audio-start yet, or past the limit: the rest is not kept
        pcm = self.decoder.decode(chunk.audio)
        self.audio.append(pcm)
        self.samples += int(pcm.size)

    async def _transcribe(self) -> None:
        if self.decoder is not None:
            self.audio.append(self.decoder.flush())
        pcm = np.concatenate(self.audio) if self.audio else np.zeros(0, dtype=np.int16)
        self.audio, self.samples, self.decoder = [], 0, None
        text = ""
        if pcm.size:
            speech = self.service.transcriber.for_user(
                f"wyoming:{self.service.sender_for(self.context)}"
            )
            try:
                heard = await speech.transcribe_pcm(to_float(pcm), language=self.language)
                text = heard.text.strip()
            except TranscriptionError as exc:
                log.warning("Wyoming: could not transcribe: %s", exc)
        await self.write_event(Transcript(text=text, language=self.language).event())

    async def _handle(self, transcript: Transcript) -> None:
        text = transcript.text.strip()
        if not text:
            await self.write_event(NotHandled(text="I did not hear a question.").event())
            return
        reply = await self.service.ask(text, transcript.context)
        if reply is None:
            await self.write_event(
                NotHandled(text="lifebot could not answer that right now.").event()
            )
            return
        await self.write_event(Handled(text=reply, context=transcript.context).event())

    async def _synthesize(self, request: Synthesize) -> None:
        synth = self.service.synthesizer
        if synth is None:
            log.warning("Wyoming: synthesize asked, but speech output is off")
            return
        try:
            speech = await synth.synthesize(request.text)
        except SynthesisError as exc:
            log.warning("Wyoming: could not synthesize: %s", exc)
            return
        fmt = {"rate": speech.rate, "width": 2, "channels": 1}
        await self.write_event(AudioStart(**fmt).event())
        raw = speech.samples.astype("<i2").tobytes()
        step = CHUNK_SAMPLES * 2
        for i in range(0, len(raw), step):
            await self.write_event(AudioChunk(audio=raw[i : i + step], **fmt).event())
        await self.write_event(AudioStop().event())
