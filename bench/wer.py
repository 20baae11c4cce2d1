"""Word error rate per speech model on espeak-ng test clips (issue 23).

``tiny.en`` (bundled, the default) is always measured; more models are CTranslate2 Whisper
folders named in ``LIFEBOT_BENCH_STT_MODELS`` (comma-separated), since nothing is downloaded at
run time. The same clips, options and language go to every model; the time is the model's own.

Run: ``.venv/bin/python -m bench.wer`` (also run by ``bench device``).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from bot.speech.transcribe import FasterWhisperTranscriber
from tests.support.speech import read_wav, speak

SENTENCES = [
    "What is on my calendar tomorrow morning",
    "Remember to buy bread and milk",
    "Pick up the laundry after work",
    "Book a table for dinner on Friday",
    "Add a meeting with Anna on Tuesday",
    "Send the report to the team before lunch",
    "Call the dentist to move my appointment",
    "How many steps did I walk yesterday",
    "Add eggs and butter to the shopping list",
    "When is my sister's birthday",
]
NUMBERS = {"7": "seven", "30": "thirty", "9": "nine"}


def words(text: str) -> list[str]:
    """Lower-case words without punctuation (digits spelled for the few the clips hold)."""
    out = re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()
    return [NUMBERS.get(w, w) for w in out]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance."""
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def wer(refs: list[str], hyps: list[str]) -> float:
    """Errors over reference words, all clips together."""
    errors = sum(edit_distance(words(r), words(h)) for r, h in zip(refs, hyps, strict=True))
    return errors / max(1, sum(len(words(r)) for r in refs))


def models() -> list[str]:
    """tiny.en plus the folders in LIFEBOT_BENCH_STT_MODELS."""
    extra = [m.strip() for m in os.environ.get("LIFEBOT_BENCH_STT_MODELS", "").split(",")]
    return ["tiny.en", *[m for m in extra if m]]


def run() -> None:
    """Print WER and time per clip for each model."""
    with tempfile.TemporaryDirectory() as tmp:
        clips = [
            read_wav(speak(s, Path(tmp) / f"{n}.wav"))[0].astype(np.float32) / 32768.0
            for n, s in enumerate(SENTENCES)
        ]
    print(f"word error rate on {len(clips)} espeak-ng sentences (language en, beam 1):")
    for name in models():
        stt = FasterWhisperTranscriber(name)
        stt.load()
        stt.transcribe_pcm_sync(clips[0], "en")  # warm
        start = time.perf_counter()
        heard = [stt.transcribe_pcm_sync(c, "en").text for c in clips]
        took = (time.perf_counter() - start) / len(clips)
        wrong = [h for s, h in zip(SENTENCES, heard, strict=True) if words(s) != words(h)]
        print(
            f"  {Path(name).name:>14}: WER {wer(SENTENCES, heard):.3f}, {took:.2f} s per clip"
            + (f"  e.g. {wrong[0]!r}" if wrong else "")
        )
        if name == "tiny.en":
            packing(stt, clips, took)


def packing(stt: FasterWhisperTranscriber, clips: list[np.ndarray], alone: float) -> None:
    """The same clips packed five to a window: cost per clip and WER, against one per call."""
    start = time.perf_counter()
    heard: list[str] = []
    for i in range(0, len(clips), 5):
        heard += [t.text for t in stt.transcribe_packed_sync(clips[i : i + 5], "en")]
    took = (time.perf_counter() - start) / len(clips)
    print(
        f"  {'packed by 5':>14}: WER {wer(SENTENCES, heard):.3f}, {took:.2f} s per clip "
        f"({alone / took:.2f}x cheaper than one per call, same run)"
    )


def main() -> None:
    """Entry point for ``python -m bench wer``."""
    run()


if __name__ == "__main__":
    main()
