"""The pendant's WebSocket server: one handler per connection, nothing but wire translation.

Auth (header or first frame), the frame ladder, limits (frame size, idle timeout, session
length) and error frames live here; audio goes straight to the session pipeline's spool.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
import urllib.parse
import uuid
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from bot.device import protocol as p
from bot.device.audio import Decoder
from bot.device.hub import DeviceHub
from bot.device.options import DeviceInfo
from bot.device.session import SessionPipeline
from bot.errors import ChannelError

log = logging.getLogger(__name__)

CLOSE_TRY_AGAIN_LATER = 1013
"""The standard WebSocket code for "overloaded": too many sockets wait to authenticate."""


class WsConnection:
    """A device's WebSocket, as the hub's ``Connection``."""

    def __init__(self, ws: ServerConnection, device: DeviceInfo) -> None:
        self.ws = ws
        self.device = device
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


class DeviceServer:
    """Accepts pendants on ``ws://HOST:PORT/v1/device``."""

    def __init__(self, hub: DeviceHub, host: str, port: int) -> None:
        self.hub = hub
        self.host = host
        self.port = port
        self._server: Server | None = None
        self._waiting: dict[str, int] = {}
        """Sockets per remote address still waiting for their auth frame."""
        self._refused = 0
        self._refused_logged = float("-inf")

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful when configured as 0)."""
        assert self._server is not None
        sock = next(iter(self._server.sockets))
        return int(sock.getsockname()[1])

    async def start(self) -> None:
        """Listen."""
        opts = self.hub.options
        self._server = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._check_path,
            max_size=opts.max_frame_bytes,
            max_queue=16,  # frames buffered per connection before TCP pushes back
            compression=None,  # audio does not compress; save the CPU
            ping_interval=20,
            ping_timeout=20,
            close_timeout=5,
            open_timeout=max(1.0, opts.auth_timeout),  # the HTTP upgrade, bounded like auth
        )
        log.info("pendant endpoint listening on ws://%s:%s%s", self.host, self.port, p.PATH)

    async def stop(self) -> None:
        """Close every connection and stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    @staticmethod
    def _check_path(conn: ServerConnection, request: Request) -> Response | None:
        if request.path.split("?", 1)[0] != p.PATH:
            return conn.respond(HTTPStatus.NOT_FOUND, f"the pendant endpoint is {p.PATH}\n")
        return None

    # --- one connection ---------------------------------------------------------------------

    async def _authenticate(self, ws: ServerConnection) -> DeviceInfo | None:
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
        return device

    def _admit(self, ws: ServerConnection) -> str | None:
        """The address to count this socket under, or None when it must be refused.

        A socket with an Authorization header is checked at once and never waits, so it is
        always let through: a flood of idle sockets cannot lock a real pendant out.
        """
        addr = str(ws.remote_address[0]) if ws.remote_address else "?"
        if ws.request is not None and (
            ws.request.headers.get("Authorization") or _url_token(ws.request.path)
        ):
            return addr
        opts = self.hub.options
        if (
            self._waiting.get(addr, 0) >= opts.max_unauthenticated_per_address
            or sum(self._waiting.values()) >= opts.max_unauthenticated
        ):
            return None
        return addr

    async def _handle(self, ws: ServerConnection) -> None:
        addr = self._admit(ws)
        if addr is None:
            self._refused += 1
            if time.monotonic() - self._refused_logged >= 60:  # one line a minute in a flood
                self._refused_logged = time.monotonic()
                log.warning(
                    "refused %d pendant connection(s): too many waiting to authenticate",
                    self._refused,
                )
                self._refused = 0
            await ws.close(CLOSE_TRY_AGAIN_LATER, "too many unauthenticated connections")
            return
        self._waiting[addr] = self._waiting.get(addr, 0) + 1
        try:
            device = await self._authenticate(ws)
        except ConnectionClosed:
            return
        finally:
            self._waiting[addr] -= 1
            if not self._waiting[addr]:
                del self._waiting[addr]
        if device is None:
            return
        conn = WsConnection(ws, device)
        await self.hub.connect(conn)
        handler = _Session(self.hub, conn)
        try:
            await handler.run()
        except ConnectionClosed:
            pass
        finally:
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
        await self.error(code, "lifebot cannot store audio right now; keep it and retry later")

    async def run(self) -> None:
        """Receive until the device leaves or goes quiet for too long."""
        ws, opts = self.conn.ws, self.hub.options
        checked = time.monotonic()
        while True:
            try:
                async with asyncio.timeout(opts.idle_timeout):
                    msg = await ws.recv()
            except TimeoutError:
                await ws.close(p.CLOSE_IDLE, f"nothing received for {opts.idle_timeout:g} s")
                return
            if time.monotonic() - checked >= opts.revoke_check_seconds:
                # `lifebot device revoke` runs in another process: notice it here.
                checked = time.monotonic()
                if not await self.hub.still_active(self.conn.device):
                    await ws.close(p.CLOSE_UNAUTHORIZED, "this device was revoked")
                    return
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
