"""Speech as a Telegram voice note: OGG/Opus, encoded offline by PyAV's bundled libopus.

Telegram shows a voice note with a waveform and a play button only for OGG files with Opus
audio; PyAV (already here for the pendant's decoding) encodes it with no system packages.
"""

from __future__ import annotations

import io

import av

from bot.errors import SynthesisError
from bot.speech.synthesize import Speech

OPUS_RATE = 24000
"""Opus takes 8, 12, 16, 24 or 48 kHz; 24 kHz keeps all of espeak-ng's 22 kHz voice."""
BIT_RATE = 32000


def ogg_opus(speech: Speech) -> bytes:
    """Encode mono 16-bit speech as an OGG/Opus file (blocking: run it in a thread)."""
    buf = io.BytesIO()
    try:
        with av.open(buf, "w", format="ogg") as out:
            stream = out.add_stream("libopus", rate=OPUS_RATE)
            stream.bit_rate = BIT_RATE
            stream.layout = "mono"
            resampler = av.AudioResampler(format="s16", layout="mono", rate=OPUS_RATE)
            frame = av.AudioFrame.from_ndarray(
                speech.samples.reshape(1, -1), format="s16", layout="mono"
            )
            frame.sample_rate = speech.rate
            for piece in [*resampler.resample(frame), *resampler.resample(None)]:
                for packet in stream.encode(piece):
                    out.mux(packet)
            for packet in stream.encode(None):
                out.mux(packet)
    except (av.FFmpegError, ValueError) as exc:
        raise SynthesisError(f"could not encode a voice note: {exc}") from exc
    return buf.getvalue()
