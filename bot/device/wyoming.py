"""A Wyoming service for Home Assistant: speech to text, lifebot's agent, and speech out.

Home Assistant's ``wyoming`` integration opens one TCP connection per request and speaks the
``wyoming`` package's events (newline-delimited JSON headers, binary payloads); the event
flows, streaming in all three directions, are in ``wyoming_handler``. ``describe`` → ``info``
says exactly what is offered: ``asr`` and ``handle`` (``tts`` only when a synthesizer is
configured), each with streaming, and no home control.

Wyoming has no authentication and names no user: the service listens on loopback unless told
otherwise, and every request is taken as one configured lifebot user's (optionally another
user per ``satellite_id``). Bound beyond loopback it announces itself over zeroconf
(``_wyoming._tcp``) so Home Assistant lists it under "Discovered". The audio of an ``asr``
request is transcribed straight away and not spooled: Home Assistant waits on that very
connection, and nobody could receive a transcript finished after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from wyoming.info import (
    AsrModel,
    AsrProgram,
    Attribution,
    HandleModel,
    HandleProgram,
    Info,
    TtsProgram,
    TtsVoice,
)
from wyoming.server import AsyncTcpServer

from bot.adapters.base import MessageHandler
from bot.clock import Clock
from bot.device.announce import Announcement, announce
from bot.device.wyoming_handler import HandledStream, WyomingHandler
from bot.errors import ConfigError
from bot.messages import Address, InboundMessage, OutboundMessage, Receipt
from bot.speech.fair import FairTranscriber
from bot.speech.synthesize import Synthesizer
from storage.db import Database
from storage.repos.users import UserRepo

log = logging.getLogger(__name__)

WYOMING_CHANNEL = "wyoming"
WYOMING_ACCOUNT = "default"
DEFAULT_SENDER = "home-assistant"
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
    zeroconf: bool = True
    """Announce the service over zeroconf when it listens beyond loopback."""

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
        self._streams: dict[str, HandledStream] = {}
        """Questions being answered (message id → where the answer streams)."""
        self.announcement: Announcement | None = None
        """The zeroconf announcement, while there is one."""

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
        await self._server.start(lambda r, w: WyomingHandler(self, r, w))
        log.info(
            "Wyoming service on tcp://%s:%s (no authentication: anyone who reaches it may use it)",
            self.options.host,
            self.bound_port,
        )
        if self.options.zeroconf:
            self.announcement = await announce(self.options.host, self.bound_port)

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
        """Stop listening (and announcing)."""
        if self.announcement is not None:
            await self.announcement.close()
            self.announcement = None
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
            supports_transcript_streaming=True,
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
            supports_handled_streaming=True,
            supports_home_control=False,  # it answers; it never switches a light
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
                    supports_synthesize_streaming=True,
                )
            )
        return Info(asr=[asr], handle=[handle], tts=tts)

    def sender_for(self, context: dict[str, Any] | None) -> str:
        """The identity a request speaks as: its satellite's user, else the configured user."""
        sat = str((context or {}).get("satellite_id") or "")
        return self._senders.get(sat, DEFAULT_SENDER)

    async def ask(
        self, text: str, context: dict[str, Any] | None, stream: HandledStream | None = None
    ) -> str | None:
        """Hand a question to the dispatcher; its answer text (None: not answered).

        With ``stream`` the answer is sent to it as it is written (``open_stream``).
        """
        if self.on_message is None:
            return None
        sender = self.sender_for(context)
        # Tells the owner which satellite_id their satellites send (for LIFEBOT_WYOMING_SATELLITES).
        log.info(
            "Wyoming question (satellite_id %r, answered as %s)",
            (context or {}).get("satellite_id"),
            sender,
        )
        message_id = stream.message_id if stream is not None else uuid.uuid4().hex
        msg = InboundMessage(
            address=Address(WYOMING_CHANNEL, WYOMING_ACCOUNT, sender),
            sender_id=sender,
            message_id=message_id,
            text=text,
            received_at=self.clock.now(),
            sender_name="Home Assistant",
            private=False,  # never becomes the place scheduled pushes go
            overheard=not self.options.trusted,
            raw={"context": context or {}},
        )
        if stream is not None:
            self._streams[message_id] = stream
        try:
            result = await self.on_message(msg)
        finally:
            self._streams.pop(message_id, None)
        reply = getattr(result, "reply", None)
        return str(reply) if reply else None

    def open_stream(self, address: Address, reply_to: str | None) -> WyomingReplyStream:
        """The answer to the question ``reply_to`` streams to its connection."""
        return WyomingReplyStream(self, self._streams.get(reply_to or ""), address)


class WyomingReplyStream:
    """The dispatcher's reply stream for a question asked over Wyoming."""

    def __init__(
        self, service: WyomingService, target: HandledStream | None, address: Address
    ) -> None:
        self.service = service
        self.target = target
        self.address = address

    async def progress(self, label: str) -> None:
        """Wyoming has no progress event: Home Assistant just waits for the chunks."""

    async def delta(self, text: str) -> None:
        """More of the answer, as a ``handled-chunk``."""
        if self.target is not None:
            await self.target.delta(text)

    async def finish(self, msg: OutboundMessage) -> Receipt:
        """The whole answer goes back with ``handled`` (see ``WyomingHandler._handle``)."""
        return await self.service.send(msg)
