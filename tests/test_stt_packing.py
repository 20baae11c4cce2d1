"""Transcription on its own threads, and short utterances packed into one model window (#23)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tests.support.speech import read_wav, shared_transcriber, speak

PHRASES = {
    "calendar": "What is on my calendar tomorrow morning",
    "bread": "Remember to buy bread and milk",
    "laundry": "Pick up the laundry after work",
    "dinner": "Book a table for dinner on Friday",
}


def _clips(tmp: Path) -> dict[str, npt.NDArray[np.float32]]:
    return {
        key: read_wav(speak(text, tmp / f"{key}.wav"))[0].astype(np.float32) / 32768.0
        for key, text in PHRASES.items()
    }


async def test_utterances_waiting_together_share_one_run_and_keep_their_own_words(
    tmp_path: Path,
) -> None:
    stt = shared_transcriber()
    clips = _clips(tmp_path)
    runs, done = stt._packer.runs, stt._packer.clips
    # Four pendants finish speaking at once: the first runs alone, the other three wait (the
    # model is falling behind) and are packed into the next window.
    heard = await asyncio.gather(*(stt.transcribe_pcm(c, language="en") for c in clips.values()))
    assert stt._packer.clips - done == 4
    assert stt._packer.runs - runs == 2
    for key, transcript in zip(clips, heard, strict=True):
        text = transcript.text.lower()
        assert key in text, (key, text)
        others = [k for k in clips if k != key]
        assert not any(k in text for k in others), (key, text)
        assert transcript.segments and transcript.segments[0].start < 1.0


def test_a_packed_silent_clip_gets_no_words_of_its_neighbours(tmp_path: Path) -> None:
    clips = _clips(tmp_path)
    quiet = np.zeros(16000, dtype=np.float32)
    out = shared_transcriber().transcribe_packed_sync(
        [clips["bread"], quiet, clips["laundry"]], "en"
    )
    assert "bread" in out[0].text.lower()
    assert out[1].text == ""
    assert "laundry" in out[2].text.lower()
    assert out[1].duration == 1.0


async def test_transcription_never_waits_for_the_shared_worker_pool(tmp_path: Path) -> None:
    # VAD, spool reads and file work use asyncio's default pool; fill it completely.
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(pool)
    release = threading.Event()
    blocker = asyncio.to_thread(release.wait, 60)
    task = asyncio.ensure_future(blocker)
    try:
        clip = _clips(tmp_path)["dinner"]
        heard = await asyncio.wait_for(shared_transcriber().transcribe_pcm(clip), 60)
        assert "dinner" in heard.text.lower()
        assert not task.done()  # the default pool was busy the whole time
    finally:
        release.set()
        await task


async def test_two_waiting_utterances_are_not_packed(tmp_path: Path) -> None:
    # Packing costs some accuracy; a queue this short is served one at a time.
    stt = shared_transcriber()
    clips = _clips(tmp_path)
    runs = stt._packer.runs
    heard = await asyncio.gather(
        *(stt.transcribe_pcm(clips[k], language="en") for k in ("bread", "laundry"))
    )
    assert stt._packer.runs - runs == 2
    assert "bread" in heard[0].text.lower() and "laundry" in heard[1].text.lower()


async def test_a_long_queue_is_packed_three_at_a_time(tmp_path: Path) -> None:
    # Seven pendants finish at once: the first runs alone, the six waiting go in two runs of
    # three. Bigger packs cost more per utterance on live streams than they save (bench device).
    stt = shared_transcriber()
    clips = list(_clips(tmp_path).values())
    queue = [clips[i % len(clips)] for i in range(7)]
    runs, done = stt._packer.runs, stt._packer.clips
    heard = await asyncio.gather(*(stt.transcribe_pcm(c, language="en") for c in queue))
    assert stt._packer.clips - done == 7
    assert stt._packer.runs - runs == 3
    keys = list(PHRASES)
    for i, transcript in enumerate(heard):
        assert keys[i % len(keys)] in transcript.text.lower(), (i, transcript.text)
