"""Voice activity detection over a live stream with the Silero model in faster-whisper's wheel.

faster-whisper's own ``get_speech_timestamps`` wants the whole recording; a pendant streams.
``StreamingVad`` runs the same ONNX model window by window and carries the model's recurrent
state and context between calls, so probabilities match a whole-file pass exactly. It holds
sample offsets only, never audio: the audio itself is in the spool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bot.device.audio import TARGET_RATE

WINDOW = 512
"""Samples per Silero window at 16 kHz (32 ms)."""
CONTEXT = 64
"""Samples of the previous window the model sees with each window."""


@dataclass(frozen=True, slots=True)
class Cut:
    """One utterance, as sample offsets from the session's start (end exclusive)."""

    start: int
    end: int

    @property
    def seconds(self) -> float:
        """Its length."""
        return (self.end - self.start) / TARGET_RATE


@dataclass(slots=True)
class VadEvents:
    """What one ``feed`` call found."""

    speech_started: bool = False
    cuts: list[Cut] | None = None
    speech_ended: bool = False
    likely_end: Cut | None = None
    """The utterance as it will be cut if the silence that began goes on (its end is final
    once the silence is longer than the padding): transcribe it early, keep it if it is cut."""
    speaking: Cut | None = None
    """The utterance still in progress, from its start to the audio seen (for partials)."""


def _silero() -> Any:
    from faster_whisper.vad import get_vad_model  # noqa: PLC0415  # heavy import, once

    return get_vad_model()


class StreamingVad:
    """Finds utterances in a stream; call ``feed`` with new audio, ``flush`` at the end.

    Not thread-safe: one stream, one caller at a time (the caller may use a worker thread).
    """

    def __init__(
        self,
        *,
        position: int = 0,
        threshold: float = 0.5,
        min_silence_ms: int = 600,
        min_speech_ms: int = 250,
        pad_ms: int = 200,
        max_utterance_s: float = 30.0,
    ) -> None:
        self.threshold = threshold
        self.neg_threshold = max(threshold - 0.15, 0.01)
        self.min_silence = TARGET_RATE * min_silence_ms // 1000
        self.min_speech = TARGET_RATE * min_speech_ms // 1000
        self.pad = TARGET_RATE * pad_ms // 1000
        self.max_utterance = int(TARGET_RATE * max_utterance_s)
        self.position = position
        """Offset of the first sample not yet seen by the model."""
        self.floor = position
        """No utterance may start before this (the end of the previous one)."""
        self.in_speech = False
        self._speech_start = 0
        self._silence_from = 0
        self._likely_sent = False
        self._pending = np.zeros(0, dtype=np.float32)
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._model = _silero()

    @property
    def buffered(self) -> int:
        """Samples waiting for a full window."""
        return int(self._pending.size)

    @property
    def in_silence(self) -> bool:
        """Inside an utterance, in a pause that may end it."""
        return self.in_speech and bool(self._silence_from)

    @property
    def safe_cursor(self) -> int:
        """Every future utterance starts at or after this offset (persisted for recovery)."""
        if self.in_speech:
            return max(self.floor, self._speech_start - self.pad)
        return max(self.floor, self.position - self.pad)

    def _probabilities(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        contexts = np.concatenate([self._context[None, :], windows[:-1, -CONTEXT:]], axis=0)
        batch = np.concatenate([contexts, windows], axis=1)
        out, self._h, self._c = self._model.session.run(
            None, {"input": batch, "h": self._h, "c": self._c}
        )
        self._context = windows[-1, -CONTEXT:].copy()
        return np.asarray(out, dtype=np.float32).reshape(-1)

    def feed(self, samples: npt.NDArray[np.float32]) -> VadEvents:
        """Run the model over new audio; return starts and finished utterances."""
        events = VadEvents()
        data = np.concatenate([self._pending, samples]) if self._pending.size else samples
        whole = data.size - data.size % WINDOW
        self._pending = data[whole:].copy()
        if whole == 0:
            return events
        probs = self._probabilities(data[:whole].reshape(-1, WINDOW))
        cuts: list[Cut] = []
        for prob in probs:
            at = self.position
            self.position += WINDOW
            if not self.in_speech:
                if prob >= self.threshold:
                    self.in_speech = True
                    self._speech_start = at
                    self._silence_from = 0
                    events.speech_started = True
                continue
            if prob >= self.threshold:
                self._silence_from = 0
                self._likely_sent = False
            elif prob < self.neg_threshold and not self._silence_from:
                self._silence_from = at
            if (
                self._silence_from
                and not self._likely_sent
                and self.position - self._silence_from >= self.pad
                and self._silence_from - self._speech_start >= self.min_speech
            ):
                # The padded end is in: this is the cut unless speech comes back.
                self._likely_sent = True
                start = max(self.floor, self._speech_start - self.pad)
                events.likely_end = Cut(start, self._silence_from + self.pad)
            if self._silence_from and self.position - self._silence_from >= self.min_silence:
                cut = self._close(self._silence_from)
                events.speech_ended = True
                if cut is not None:
                    cuts.append(cut)
            elif self.position - self._speech_start >= self.max_utterance:
                # A monologue without pauses: cut it so transcripts keep flowing.
                cut = self._close(self.position, pad=False)
                if cut is not None:
                    cuts.append(cut)
                self.in_speech = True
                self._speech_start = self.position
        events.cuts = cuts or None
        if self.in_speech:
            events.speaking = Cut(max(self.floor, self._speech_start - self.pad), self.position)
        return events

    def _close(self, speech_end: int, *, pad: bool = True) -> Cut | None:
        self.in_speech = False
        start = max(self.floor, self._speech_start - self.pad)
        end = min(self.position, speech_end + self.pad) if pad else speech_end
        self._silence_from = 0
        self._likely_sent = False
        if speech_end - self._speech_start < self.min_speech:
            return None  # a click or a cough: too short to be words
        self.floor = end
        return Cut(start, end)

    def flush(self) -> Cut | None:
        """End of stream (disconnect, stop): the utterance in progress, cut where audio ends."""
        self.position += self._pending.size
        self._pending = np.zeros(0, dtype=np.float32)
        if not self.in_speech:
            return None
        end = self._silence_from or self.position
        cut = self._close(end)
        if cut is not None:
            cut = Cut(cut.start, min(self.position, max(cut.end, end)))
        return cut

    def skip_to(self, position: int) -> None:
        """Forget the stream up to ``position`` (after a push-to-talk utterance)."""
        self.position = position
        self.floor = position
        self.in_speech = False
        self._silence_from = 0
        self._pending = np.zeros(0, dtype=np.float32)
