"""Decoding and resampling: whatever the device sends becomes 16 kHz mono int16.

PyAV (FFmpeg, installed with faster-whisper) does the resampling and the Opus decoding, both
streaming: state carries over between frames, so frame edges leave no clicks or gaps. The
speech segmentation lives in ``vad.py`` and the durable spool in ``spool.py``.
"""

from __future__ import annotations

from typing import Any

import av
import numpy as np
import numpy.typing as npt

from bot.device.protocol import OMI_FRAME_SAMPLES, ProtocolError

TARGET_RATE = 16_000
"""Everything after decoding runs at Whisper's rate."""

Int16 = npt.NDArray[np.int16]


def opus_available() -> bool:
    """True when this FFmpeg build can decode Opus (PyAV's wheels ship libopus)."""
    try:
        av.CodecContext.create("opus", "r")
    except (av.FFmpegError, ValueError):
        return False
    return True


class Decoder:
    """Turns the binary frames of one stream into 16 kHz mono int16 samples."""

    def __init__(self, codec: str, sample_rate: int, channels: int) -> None:
        self.codec = codec
        self.sample_rate = sample_rate
        self.channels = channels
        self._carry = b""
        self._layout = "mono" if channels == 1 else "stereo"
        self._passthrough = codec == "pcm16" and sample_rate == TARGET_RATE and channels == 1
        self._resampler: Any = None
        if not self._passthrough:
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=TARGET_RATE)
        self._opus: Any = None
        self.frame_samples = OMI_FRAME_SAMPLES.get(codec)
        """Samples every packet must hold (Omi's codecs); None: any Opus packet."""
        if codec in ("opus", *OMI_FRAME_SAMPLES):
            try:
                self._opus = av.CodecContext.create("opus", "r")
            except (av.FFmpegError, ValueError) as exc:
                raise ProtocolError(
                    "unsupported_codec", "this server cannot decode Opus; send pcm16"
                ) from exc
            self._opus.sample_rate = sample_rate
            self._opus.layout = self._layout

    def decode(self, data: bytes) -> Int16:
        """Decode one binary frame; raise ProtocolError(``bad_audio``) for undecodable Opus."""
        if self._opus is not None:
            return self._decode_opus(data)
        # A frame may end mid-sample; keep the odd bytes for the next frame instead of
        # dropping them (dropping one byte would swap every later sample's byte order).
        step = 2 * self.channels
        data = self._carry + data
        cut = len(data) - len(data) % step
        self._carry = data[cut:]
        samples = np.frombuffer(data[:cut], dtype="<i2")
        if self._passthrough or samples.size == 0:
            return samples.astype(np.int16, copy=True)
        frame = av.AudioFrame.from_ndarray(
            samples.reshape(1, -1), format="s16", layout=self._layout
        )
        frame.sample_rate = self.sample_rate
        return self._resample(frame)

    def _decode_opus(self, data: bytes) -> Int16:
        try:
            frames = self._opus.decode(av.Packet(data))
        except (av.FFmpegError, ValueError) as exc:
            raise ProtocolError("bad_audio", f"an Opus packet could not be decoded: {exc}") from exc
        if self.frame_samples is not None and frames:
            # FFmpeg decodes Opus at 48 kHz whatever the stream's rate: compare durations.
            got = round(sum(int(f.samples) for f in frames) * TARGET_RATE / frames[0].sample_rate)
            if got != self.frame_samples:
                # Packets of another length: the device uses another codec than it said.
                raise ProtocolError(
                    "bad_audio",
                    f"{self.codec} packets hold {self.frame_samples} samples at 16 kHz "
                    f"({self.frame_samples // 16} ms), this one {got}",
                )
        out = [self._resample(frame) for frame in frames]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int16)

    def _resample(self, frame: Any) -> Int16:
        pieces = [f.to_ndarray().reshape(-1) for f in self._resampler.resample(frame)]
        return np.concatenate(pieces).astype(np.int16) if pieces else np.zeros(0, dtype=np.int16)

    def flush(self) -> Int16:
        """Samples still inside the resampler at the end of a stream."""
        if self._resampler is None:
            return np.zeros(0, dtype=np.int16)
        return self._resample(None)


def to_float(samples: Int16) -> npt.NDArray[np.float32]:
    """int16 PCM to float32 in [-1, 1], as Whisper and Silero want it."""
    return samples.astype(np.float32) / 32768.0
