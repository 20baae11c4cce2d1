"""The pendant channel's options, and what the pipeline knows of a device and its link."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.device import protocol as p
from bot.device.vad import StreamingVad
from storage.models import Device


@dataclass(frozen=True, slots=True)
class DeviceOptions:
    """Limits and tuning of the pendant channel (from ``LIFEBOT_DEVICE_*``)."""

    spool_dir: Path
    max_frame_bytes: int = 65536
    max_session_seconds: float = 3600.0
    idle_timeout: float = 90.0
    auth_timeout: float = 2.0
    max_unauthenticated: int = 64
    """Sockets without a checked token (from the TCP accept on), at most, in all: a flood
    cannot pile up (``gate.py``: the oldest is dropped for a newcomer)."""
    max_unauthenticated_per_address: int = 8
    """The same, per remote address: one host cannot take every slot."""
    max_devices: int = 64
    """Authenticated pendants connected at once: the reserve no unauthenticated socket takes."""
    resume_seconds: float = 300.0
    vad_silence_ms: int = 600
    max_utterance_seconds: float = 30.0
    keep_audio: bool = False
    wake_phrase: str = "hey lifebot"
    stt_workers: int = 1
    partials: bool = True
    """Send partial transcripts of the utterance in progress (only while the model is idle)."""
    early_final: bool = True
    """Transcribe the likely utterance during the silence that ends it (only while idle)."""
    revoke_check_seconds: float = 1.0
    """How often the connected pendants' tokens are checked again (``device revoke`` runs in
    another process): a revoked pendant is closed within this plus a moment, idle or not."""
    refusal_log_seconds: float = 60.0
    """Refused sockets are logged once, then counted: one line per this many seconds."""
    stop_grace_seconds: float = 5.0
    """On shutdown, queued work gets this long to finish; the rest resumes at the next start."""

    def new_vad(self, position: int) -> StreamingVad:
        """A VAD tuned by these options, starting at ``position``."""
        return StreamingVad(
            position=position,
            min_silence_ms=self.vad_silence_ms,
            max_utterance_s=self.max_utterance_seconds,
        )


OTHER_DESCRIPTORS = 96
"""Descriptors kept for everything but pendant sockets (database, logs, model files, other
channels' sockets, subprocess pipes)."""
MAX_WAITING = 64
"""Unauthenticated pendant sockets at most, however high the open-file limit."""
MAX_DEVICES = 512
"""Authenticated pendants at most, however high the open-file limit."""


def open_file_limit() -> int:
    """The process's soft limit on open files (``serve`` raises it to the hard limit first)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65536 if soft == resource.RLIM_INFINITY else int(soft)


def socket_caps(limit: int) -> tuple[int, int]:
    """(unauthenticated sockets, authenticated pendants) that fit ``limit`` descriptors.

    What is left after ``OTHER_DESCRIPTORS`` goes to pendants: at most a third to sockets
    without a token yet, the rest to authenticated pendants, which hold two descriptors each
    (the socket and the session's spool file). Under 256 descriptors: 53 and 53.
    """
    budget = max(24, limit - OTHER_DESCRIPTORS)
    waiting = max(8, min(MAX_WAITING, budget // 3))
    devices = max(4, min(MAX_DEVICES, (budget - waiting) // 2))
    return waiting, devices


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What the pipeline needs to know of a device."""

    id: int
    name: str
    user_id: int

    @classmethod
    def of(cls, device: Device) -> DeviceInfo:
        """From the database row."""
        assert device.id is not None
        return cls(device.id, device.name, device.user_id)


class Connection(Protocol):
    """A live link to a device (the WebSocket, in ``server.py``)."""

    device: DeviceInfo
    speak: bool
    """The device asked for spoken answers (``hello`` with ``speak``)."""

    async def send(self, frame: p.Frame) -> None:
        """Send one frame; raise ChannelError when the device is gone."""
        ...

    async def send_audio(self, data: bytes) -> None:
        """Send one binary frame of audio; raise ChannelError when the device is gone."""
        ...

    async def close(self, code: int, reason: str) -> None:
        """Close the link."""
        ...
