"""The pendant's wire protocol: JSON text frames as small dataclasses (docs/device-protocol.md).

Every frame has a ``type``. Client frames are parsed by one flat ladder in ``parse_client``;
server frames serialise with ``to_wire``. Binary frames carry audio and never pass through here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

PATH = "/v1/device"
"""The WebSocket endpoint."""

MODES = ("ask", "ambient")
CODECS = ("pcm16", "opus", "omi-opus", "omi-opus-fs320")
OMI_FRAME_SAMPLES = {"omi-opus": 160, "omi-opus-fs320": 320}
"""Omi firmware's Opus (16 kHz mono): codec 20 sends 10 ms packets, codec 21 (FS320) 20 ms."""
MIN_RATE = 8000
MAX_RATE = 48000
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)

CLOSE_UNAUTHORIZED = 4401
"""Bad, missing, late or revoked token."""
CLOSE_IDLE = 4408
"""Nothing received for the idle timeout."""
CLOSE_REPLACED = 4409
"""The same device opened a newer connection."""


MAX_DEPTH = 16
"""Our frames nest two levels at most; anything deeper is refused before json.loads (a
20,000-deep array would otherwise exhaust Python's recursion limit)."""


def load_json(raw: str) -> Any:
    """``json.loads`` bounded in depth; every problem is a ProtocolError("malformed_json")."""
    depth = deepest = 0
    in_string = escaped = False
    # Counting brackets runs in C; only a frame that could be too deep is walked in Python.
    for ch in raw if raw.count("[") + raw.count("{") > MAX_DEPTH else "":
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                raise ProtocolError("malformed_json", f"nested deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError("malformed_json", f"not valid JSON: {exc}") from exc


class ProtocolError(ValueError):
    """A frame the server cannot use; becomes an ``error`` frame with ``code``."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True, slots=True)
class Frame:
    """Base of every JSON frame; ``to_wire`` gives the JSON text."""

    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The frame as a JSON-able dict, ``type`` first."""
        out: dict[str, Any] = {"type": self.type}
        for name in self.__dataclass_fields__:
            out[name] = getattr(self, name)
        return out

    def to_wire(self) -> str:
        """The frame as JSON text."""
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)

    @classmethod
    def from_wire(cls, raw: str) -> dict[str, Any]:
        """Decode any frame to a dict with a ``type`` (clients read server frames this way)."""
        data = load_json(raw)
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ProtocolError("malformed_json", "a frame must be a JSON object with a type")
        return data


# --- client to server ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Auth(Frame):
    """The token, as the first frame, when the Authorization header cannot be set."""

    type: ClassVar[str] = "auth"
    token: str
    """The device token printed by ``lifebot device add``."""


@dataclass(frozen=True, slots=True)
class Hello(Frame):
    """Declares the audio format and mode; required before any audio."""

    type: ClassVar[str] = "hello"
    codec: str = "pcm16"
    """``pcm16`` (little-endian signed 16-bit), ``opus`` (one raw Opus packet per frame), or
    Omi firmware's Opus: ``omi-opus`` (codec 20, 10 ms packets) or ``omi-opus-fs320`` (codec
    21, 20 ms packets), 16 kHz mono, one packet per frame without Omi's 3-byte BLE header."""
    sample_rate: int = 16000
    """8000 to 48000; resampled to 16 kHz on the server."""
    channels: int = 1
    """1 or 2 (stereo is mixed down)."""
    mode: str = "ask"
    """``ask`` or ``ambient``."""
    language: str | None = None
    """A language hint such as ``en``; None lets the model decide."""
    session_id: str | None = None
    """A session id from an earlier ``ready``, to continue that session."""
    speak: bool = False
    """The device has a speaker: send answers as speech too (when speech output is on)."""


@dataclass(frozen=True, slots=True)
class AudioStart(Frame):
    """Push-to-talk pressed: the audio until ``audio-stop`` is one utterance."""

    type: ClassVar[str] = "audio-start"


@dataclass(frozen=True, slots=True)
class AudioStop(Frame):
    """Push-to-talk released: transcribe the utterance now."""

    type: ClassVar[str] = "audio-stop"


@dataclass(frozen=True, slots=True)
class Mode(Frame):
    """Switch between ``ask`` and ``ambient``."""

    type: ClassVar[str] = "mode"
    mode: str


@dataclass(frozen=True, slots=True)
class Text(Frame):
    """A typed question from a companion app (always answered, whatever the mode)."""

    type: ClassVar[str] = "text"
    text: str
    id: str | None = None
    """The client's id for the question; a resent question with the same id is answered once."""


@dataclass(frozen=True, slots=True)
class Start(Frame):
    """Minimal mode: ``hello`` and ``audio-start`` in one frame.

    Any ``hello`` field may be given (defaults otherwise), so a small firmware needs only
    ``start``, binary audio, ``end``.
    """

    type: ClassVar[str] = "start"
    hello: Hello


@dataclass(frozen=True, slots=True)
class Ping(Frame):
    """Heartbeat; answered with ``pong``."""

    type: ClassVar[str] = "ping"


ClientFrame = Auth | Hello | Start | AudioStart | AudioStop | Mode | Text | Ping

_BARE: dict[str, type[AudioStart | AudioStop | Ping]] = {
    "audio-start": AudioStart,
    "audio-stop": AudioStop,
    "end": AudioStop,  # minimal mode's name for it
    "ping": Ping,
}


def _field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = data.get(name, default)
    if value is None:
        return default
    # bool is an int subclass in Python; a JSON true is never a sample rate.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ProtocolError("bad_field", f"{name!r} has the wrong type")
    return value


def _hello(data: dict[str, Any]) -> Hello:
    codec = _field(data, "codec", str, "pcm16")
    rate = _field(data, "sample_rate", int, 16000)
    channels = _field(data, "channels", int, 1)
    mode = _field(data, "mode", str, "ask")
    if codec not in CODECS:
        raise ProtocolError(
            "unsupported_codec",
            f"codec {codec!r} is not supported; use pcm16, opus, omi-opus or omi-opus-fs320",
        )
    if codec in OMI_FRAME_SAMPLES and (rate, channels) != (16000, 1):
        raise ProtocolError("unsupported_rate", f"{codec} is 16000 Hz mono, as Omi encodes it")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ProtocolError(
            "unsupported_rate", f"sample_rate {rate} is outside {MIN_RATE} to {MAX_RATE} Hz"
        )
    if codec == "opus" and rate not in OPUS_RATES:
        raise ProtocolError("unsupported_rate", f"Opus runs at {OPUS_RATES} Hz, not {rate}")
    if channels not in (1, 2):
        raise ProtocolError("unsupported_channels", "channels must be 1 or 2")
    if mode not in MODES:
        raise ProtocolError("bad_mode", f"mode must be ask or ambient, not {mode!r}")
    return Hello(
        codec,
        rate,
        channels,
        mode,
        _field(data, "language", str, None),
        _field(data, "session_id", str, None),
        _field(data, "speak", bool, False),
    )


def parse_client(raw: str) -> ClientFrame:
    """Parse one client text frame; raise ProtocolError with a code for anything unusable."""
    data = load_json(raw)
    if not isinstance(data, dict):
        raise ProtocolError("malformed_json", "a frame must be a JSON object")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("missing_type", 'every frame needs a "type"')
    if kind == "hello":
        return _hello(data)
    if kind == "start":
        return Start(_hello(data))
    if kind in _BARE:
        return _BARE[kind]()
    if kind == "mode":
        mode = _field(data, "mode", str, "")
        if mode not in MODES:
            raise ProtocolError("bad_mode", f"mode must be ask or ambient, not {mode!r}")
        return Mode(mode)
    if kind == "text":
        text = _field(data, "text", str, "").strip()
        if not text:
            raise ProtocolError("bad_field", "a text frame needs non-empty 'text'")
        return Text(text, _field(data, "id", str, None))
    if kind == "auth":
        return Auth(_field(data, "token", str, ""))
    raise ProtocolError("unknown_type", f"unknown frame type {kind!r}")


# --- server to client ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ready(Frame):
    """The session is open; audio may flow."""

    type: ClassVar[str] = "ready"
    session_id: str
    resumed: bool = False
    """True when an earlier session continues (reconnect)."""
    mode: str = "ask"


@dataclass(frozen=True, slots=True)
class Vad(Frame):
    """Voice activity changed."""

    type: ClassVar[str] = "vad"
    state: str
    """``speech`` or ``silence``."""


@dataclass(frozen=True, slots=True)
class Transcript(Frame):
    """What was heard; times are seconds from the session's start."""

    type: ClassVar[str] = "transcript"
    text: str
    final: bool
    segment_id: str
    start: float
    end: float
    question: bool = False
    """On a final: the utterance goes to the agent, so a ``reply`` will follow."""


@dataclass(frozen=True, slots=True)
class ReplyDelta(Frame):
    """More of the answer while it is produced."""

    type: ClassVar[str] = "reply-delta"
    text: str


@dataclass(frozen=True, slots=True)
class Reply(Frame):
    """The whole answer, with its sources."""

    type: ClassVar[str] = "reply"
    text: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "reply"
    """``reply`` to a question, or a push such as ``reminder`` or ``briefing``."""
    buttons: list[dict[str, str]] = field(default_factory=list)
    """Choices ``{"label", "data"}``: answer by saying a label, or send a ``text`` frame with it."""


@dataclass(frozen=True, slots=True)
class SpeechStart(Frame):
    """Spoken answer follows: binary frames of mono PCM16 little-endian at ``sample_rate``."""

    type: ClassVar[str] = "speech-start"
    text: str
    """The words being spoken (one sentence-sized piece of the answer)."""
    sample_rate: int
    codec: str = "pcm16"


@dataclass(frozen=True, slots=True)
class SpeechEnd(Frame):
    """The piece announced by ``speech-start`` is complete."""

    type: ClassVar[str] = "speech-end"


@dataclass(frozen=True, slots=True)
class Error(Frame):
    """Something the client sent could not be used; the connection stays open."""

    type: ClassVar[str] = "error"
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Pong(Frame):
    """Answer to ``ping``."""

    type: ClassVar[str] = "pong"
