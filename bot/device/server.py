"""The pendant's WebSocket server: one handler per connection, nothing but wire translation.

Auth (header or first frame), the frame ladder, limits (frame size, idle timeout, session
length) and error frames live here; audio goes straight to the session pipeline's spool.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import urllib.parse
import uuid
from http import HTTPStatus
from typing import Any, cast

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from bot.device import protocol as p
from bot.device.audio import Decoder
from bot.device.gate import RefusalLog, Socket, SocketGate
from bot.device.hub import DeviceHub
from bot.device.options import DeviceInfo
from bot.device.session import SessionPipeline
from bot.device.storage_notice import tell_owner
from bot.errors import ChannelError
from storage.repos.devices import hash_token

log = logging.getLogger(__name__)

CLOSE_TRY_AGAIN_LATER = 1013
"""The standard WebSocket code for "overloaded": too many pendants are connected."""
ACCEPT_BATCH = 16
"""Sockets accepted per wake-up of the event loop, and the kernel's queue of them."""


class WsConnection:
    """A device's WebSocket, as the hub's ``Connection``."""

    def __init__(self, ws: ServerConnection, device: DeviceInfo, token_hash: str) -> None:
        self.ws = ws
        self.device = device
        self.token_hash = token_hash
        """The digest of the token it authenticated with: revoked or replaced, it is closed."""
        self.speak = False
        """Set by the latest ``hello``: the device wants spoken answers."""

    async def send(self, frame: p.Frame) -> None:
        """Send one frame; ChannelError when the device is gone."""
        try:
            await self.ws.send(frame.to_wire())
        except ConnectionClosed as exc:
            raise ChannelError(f"device {self.device.name} is not connected") from exc

    async def send_audio(self, data: bytes) -> None:
        """Send one binary frame; ChannelError when the device is gone."""
        try:
            await self.ws.send(data)
        except ConnectionClosed as exc:
            raise ChannelError(f"device {self.device.name} is not connected") from exc

    async def close(self, code: int, reason: str) -> None:
        """Close the socket with a code and a reason."""
        await self.ws.close(code, reason)


def _gated(gate: SocketGate) -> type[ServerConnection]:
    """A ServerConnection class that reports to ``gate`` from the TCP accept on."""

    class GatedConnection(ServerConnection):
        """A pendant socket counted by the gate before any byte of the upgrade is read."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # starts websockets' handler task
            peer = transport.get_extra_info("peername")
            gate.admit(self, str(peer[0]) if peer else "?")

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            gate.release(self)

        def abort(self) -> None:
            """Drop the TCP connection now, freeing its descriptor (no closing handshake)."""
            self.transport.abort()

    return GatedConnection


class DeviceServer:
    """Accepts pendants on ``ws://HOST:PORT/v1/device``."""

    def __init__(self, hub: DeviceHub, host: str, port: int) -> None:
        self.hub = hub
        self.host = host
        self.port = port
        self._server: Server | None = None
        opts = hub.options
        self.gate = SocketGate(
            max_waiting=opts.max_unauthenticated,
            max_waiting_per_address=opts.max_unauthenticated_per_address,
            max_devices=opts.max_devices,
            refusals=RefusalLog(opts.refusal_log_seconds),
        )
        """Counts every socket from its accept: a flood cannot exhaust the descriptors."""
        self._live: set[WsConnection] = set()
        """Authenticated connections of this process."""
        self._watch: asyncio.Task[None] | None = None

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful when configured as 0)."""
        assert self._server is not None
        sock = next(iter(self._server.sockets))
        return int(sock.getsockname()[1])

    async def start(self) -> None:
        """Listen, and watch connected pendants for revocation."""
        opts = self.hub.options
        # The options may have been replaced since __init__ (tests tune the caps).
        self.gate.max_waiting = opts.max_unauthenticated
        self.gate.max_waiting_per_address = opts.max_unauthenticated_per_address
        self.gate.max_devices = opts.max_devices
        self.gate.refusals.interval = opts.refusal_log_seconds
        self._server = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._check_request,
            create_connection=_gated(self.gate),
            max_size=opts.max_frame_bytes,
            max_queue=16,  # frames buffered per connection before TCP pushes back
            compression=None,  # audio does not compress; save the CPU
            ping_interval=20,
            ping_timeout=20,
            close_timeout=5,
            open_timeout=max(1.0, opts.auth_timeout),  # the HTTP upgrade, bounded like auth
            # Sockets accepted per wake-up of the event loop (and the kernel's queue): small, so
            # a pendant's request is read before a burst of newcomers could push it out.
            backlog=ACCEPT_BATCH,
        )
        self._watch = asyncio.create_task(self._watch_tokens(), name="pendant-revocations")
        log.info("pendant endpoint listening on ws://%s:%s%s", self.host, self.port, p.PATH)

    async def stop(self) -> None:
        """Close every connection and stop listening."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self.gate.refusals.close()

    # --- revocation ---------------------------------------------------------------------------

    async def _watch_tokens(self) -> None:
        """Every ``revoke_check_seconds``: close connections whose token no longer holds.

        ``device revoke`` and the web page's Revoke may run in another process; on PostgreSQL
        a notification (``revoked``) closes the socket at once, and this poll is the safety
        net. An idle pendant sends nothing, so a check per received frame would never see it.
        """
        while True:
            await asyncio.sleep(max(0.05, self.hub.options.revoke_check_seconds))
            try:
                await self.close_revoked()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("checking connected pendants for revocation failed")

    async def revoked(self, device_id: int) -> None:
        """Another process revoked ``device_id`` (a PostgreSQL notification): check now."""
        if any(c.device.id == device_id for c in self._live):
            await self.close_revoked()

    async def close_revoked(self) -> int:
        """Close every connection whose device was revoked or got a new token; how many."""
        live = list(self._live)
        if not live:
            return 0
        tokens = await self.hub.token_hashes(sorted({c.device.id for c in live}))
        gone = [c for c in live if tokens.get(c.device.id, "") != c.token_hash]
        for conn in gone:
            self._live.discard(conn)
            log.warning("pendant %s was revoked: closing its connection", conn.device.name)
        await asyncio.gather(
            *(c.close(p.CLOSE_UNAUTHORIZED, "this device was revoked") for c in gone),
            return_exceptions=True,
        )
        return len(gone)

    def _check_request(self, conn: ServerConnection, request: Request) -> Response | None:
        """Before the upgrade: the right path; a token in the request is checked first."""
        if request.path.split("?", 1)[0] != p.PATH:
            return conn.respond(HTTPStatus.NOT_FOUND, f"the pendant endpoint is {p.PATH}\n")
        if request.headers.get("Authorization") or _url_token(request.path):
            self.gate.presenting(cast(Socket, conn))
        return None

    # --- one connection ---------------------------------------------------------------------

    async def _authenticate(self, ws: ServerConnection) -> tuple[DeviceInfo, str] | None:
        """The device and its token's digest, or None (the socket closed with the reason)."""
        header = ws.request.headers.get("Authorization", "") if ws.request else ""
        in_url = _url_token(ws.request.path) if ws.request else None
        if in_url is not None:
            # Minimal mode: firmware whose WebSocket library cannot set headers.
            token = in_url
        elif header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                await ws.close(p.CLOSE_UNAUTHORIZED, "use Authorization: Bearer TOKEN")
                return None
        else:
            try:
                async with asyncio.timeout(self.hub.options.auth_timeout):
                    first = await ws.recv()
            except TimeoutError:
                await ws.close(p.CLOSE_UNAUTHORIZED, "no token: send an auth frame first")
                return None
            self.gate.presenting(cast(Socket, ws))
            frame: Any = None
            if isinstance(first, str):
                try:
                    frame = p.parse_client(first)
                except p.ProtocolError:
                    frame = None
            if not isinstance(frame, p.Auth) or not frame.token:
                await ws.close(p.CLOSE_UNAUTHORIZED, "no token: the first frame must be auth")
                return None
            token = frame.token
        device = await self.hub.authenticate(token.strip())
        if device is None:
            await ws.close(p.CLOSE_UNAUTHORIZED, "unknown or revoked device token")
            return None
        return device, hash_token(token.strip())

    async def _handle(self, ws: ServerConnection) -> None:
        try:
            found = await self._authenticate(ws)
        except ConnectionClosed:
            return
        if found is None:
            return
        if not self.gate.authenticated(cast(Socket, ws)):
            await ws.close(CLOSE_TRY_AGAIN_LATER, "too many pendants are connected")
            return
        conn = WsConnection(ws, *found)
        self._live.add(conn)
        await self.hub.connect(conn)
        handler = _Session(self.hub, conn)
        try:
            await handler.run()
        except ConnectionClosed:
            pass
        finally:
            self._live.discard(conn)
            await self.hub.disconnect(conn, handler.pipeline)


class _Session:
    """The frame loop of one authenticated connection."""

    def __init__(self, hub: DeviceHub, conn: WsConnection) -> None:
        self.hub = hub
        self.conn = conn
        self.pipeline: SessionPipeline | None = None
        self.decoder: Decoder | None = None
        self._storage_logged = False

    async def error(self, code: str, message: str) -> None:
        """Tell the device what was wrong; the connection stays open."""
        await self.conn.send(p.Error(code, message))

    async def storage_error(self, exc: OSError) -> None:
        """The spool cannot take audio (disk full, read-only, not a folder): say so, stay open.

        What was already spooled is kept; the device is told with a code it can act on.
        """
        code = (
            "storage_full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "storage_unavailable"
        )
        if not self._storage_logged:
            self._storage_logged = True
            log.error(
                "pendant %s: the audio spool cannot be written (%s); run `lifebot doctor`",
                self.conn.device.name,
                exc,
            )
            # Once per session here; the outbox key makes it once a day per pendant and code.
            await tell_owner(self.hub.db, self.hub.clock, self.conn.device, code)
        await self.error(code, "lifebot cannot store audio right now; keep it and retry later")

    async def run(self) -> None:
        """Receive until the device leaves or goes quiet for too long."""
        ws, opts = self.conn.ws, self.hub.options
        while True:
            try:
                async with asyncio.timeout(opts.idle_timeout):
                    msg = await ws.recv()
            except TimeoutError:
                await ws.close(p.CLOSE_IDLE, f"nothing received for {opts.idle_timeout:g} s")
                return
            # Revocation is watched by DeviceServer._watch_tokens, idle or not; what a
            # revoked device sent is dropped by the hub before anything is stored or asked.
            if isinstance(msg, bytes):
                await self.audio(msg)
            else:
                await self.frame(msg)

    async def audio(self, data: bytes) -> None:
        """A binary frame: decode, spool, segment."""
        if self.pipeline is None or self.decoder is None:
            await self.error("audio_before_hello", "send hello before any audio")
            return
        try:
            pcm = self.decoder.decode(data)
        except p.ProtocolError as exc:
            await self.error(exc.code, exc.message)
            return
        try:
            await self.pipeline.add_audio(pcm)
        except OSError as exc:
            await self.storage_error(exc)
            return
        if self.pipeline.spool.seconds >= self.hub.options.max_session_seconds:
            self.pipeline = await self.hub.rollover(self.conn, self.pipeline)
            await self.conn.send(p.Ready(self.pipeline.id, resumed=False, mode=self.pipeline.mode))

    async def frame(self, raw: str) -> None:
        """A text frame: the flat ladder of client frame types."""
        try:
            frame = p.parse_client(raw)
        except p.ProtocolError as exc:
            await self.error(exc.code, exc.message)
            return
        if isinstance(frame, p.Ping):
            await self.conn.send(p.Pong())
        elif isinstance(frame, p.Hello):
            await self.hello(frame)
        elif isinstance(frame, p.Start):
            await self.hello(frame.hello)
            if self.pipeline is not None:
                await self.pipeline.push_to_talk(start=True)
        elif isinstance(frame, p.Auth):
            return  # already authenticated (a client that sends both header and frame)
        elif self.pipeline is None:
            await self.error("hello_first", f"send hello before {frame.type}")
        elif isinstance(frame, p.AudioStart | p.AudioStop):
            await self.pipeline.push_to_talk(start=isinstance(frame, p.AudioStart))
        elif isinstance(frame, p.Mode):
            await self.pipeline.set_mode(frame.mode)
        elif isinstance(frame, p.Text):
            self.pipeline.ask_typed(frame.text, frame.id or _short_id())

    async def hello(self, hello: p.Hello) -> None:
        """Open or resume the session; a later hello may change format or mode."""
        try:
            decoder = Decoder(hello.codec, hello.sample_rate, hello.channels)
        except p.ProtocolError as exc:
            await self.error(exc.code, exc.message)
            return
        if self.decoder is not None and self.pipeline is not None:
            await self.pipeline.add_audio(self.decoder.flush())
        try:
            pipeline, resumed = await self.hub.open_session(self.conn, hello, self.pipeline)
        except OSError as exc:
            await self.storage_error(exc)
            return
        self.decoder, self.pipeline = decoder, pipeline
        self.conn.speak = hello.speak
        await self.conn.send(p.Ready(self.pipeline.id, resumed=resumed, mode=self.pipeline.mode))
        self.hub.ready(self.conn.device)  # pushes that waited for it leave now, after ``ready``


def _url_token(path: str) -> str | None:
    """The ``token`` query parameter of the upgrade request, if any."""
    query = urllib.parse.urlsplit(path).query
    values = urllib.parse.parse_qs(query).get("token")
    return values[0].strip() if values and values[0].strip() else None


def _short_id() -> str:
    return uuid.uuid4().hex[:12]
