"""The audio pipeline's parts: decoding, resampling, VAD segmentation, spool, wire frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bot.device import protocol as p
from bot.device.audio import Decoder, opus_available, to_float
from bot.device.spool import Spool, SpoolFile, read_samples
from bot.device.utterance import strip_wake_phrase
from bot.device.vad import StreamingVad
from tests.support.speech import concat_wavs, read_wav, speak


def test_pcm16_at_16k_passes_through_and_odd_bytes_wait_for_the_next_frame() -> None:
    dec = Decoder("pcm16", 16000, 1)
    samples = np.arange(-50, 50, dtype=np.int16)
    raw = samples.astype("<i2").tobytes()
    first = dec.decode(raw[:51])  # half a sample at the end
    second = dec.decode(raw[51:])
    assert np.array_equal(np.concatenate([first, second]), samples)


@pytest.mark.parametrize(("rate", "channels"), [(8000, 1), (44100, 2), (48000, 1)])
def test_other_rates_and_stereo_become_16k_mono(rate: int, channels: int) -> None:
    dec = Decoder("pcm16", rate, channels)
    tone = (np.sin(np.arange(rate) * 2 * np.pi * 440 / rate) * 8000).astype(np.int16)
    frames = np.repeat(tone, channels)
    out = [
        dec.decode(frames[i : i + 960].astype("<i2").tobytes()) for i in range(0, frames.size, 960)
    ]
    total = np.concatenate([*out, dec.flush()])
    assert abs(total.size - 16000) <= 64  # one second in, one second out
    assert np.abs(total[2000:14000]).max() > 6000  # the tone survived (not silence, not noise)


def test_opus_is_decodable_with_the_installed_ffmpeg() -> None:
    assert opus_available()
    with pytest.raises(p.ProtocolError) as err:
        Decoder("opus", 16000, 1).decode(b"\xff\x00 not an opus packet")
    assert err.value.code == "bad_audio"


def test_vad_cuts_two_sentences_apart_and_keeps_each_whole(tmp_path: Path) -> None:
    one = speak("Remember to buy bread and milk", tmp_path / "1.wav")
    two = speak("Pick up the laundry after work", tmp_path / "2.wav")
    clip, _ = read_wav(concat_wavs(tmp_path / "both.wav", one, two, gap=1.5))
    lengths = [read_wav(one)[0].size, read_wav(two)[0].size]
    vad = StreamingVad(min_silence_ms=600)
    cuts = []
    starts = 0
    for i in range(0, clip.size, 320):  # 20 ms frames, as a pendant sends them
        events = vad.feed(to_float(clip[i : i + 320]))
        starts += events.speech_started
        cuts += events.cuts or []
    assert vad.flush() is None
    assert len(cuts) == 2 and starts == 2
    first, second = cuts
    assert first.end <= second.start
    # Each cut covers its sentence (espeak's own leading/trailing silence may be trimmed).
    assert first.end - first.start > 0.6 * lengths[0]
    assert second.end - second.start > 0.6 * lengths[1]
    assert first.start < lengths[0] // 2 < first.end
    assert vad.safe_cursor >= second.end


def test_vad_flush_cuts_speech_that_the_stream_ended_in(tmp_path: Path) -> None:
    clip, _ = read_wav(speak("My favourite colour is green", tmp_path / "g.wav"))
    vad = StreamingVad()
    events = vad.feed(to_float(clip))
    assert not events.cuts
    cut = vad.flush()
    assert cut is not None and cut.start < 0.2 * clip.size and cut.end > 0.85 * clip.size


def test_silence_and_clicks_make_no_utterances() -> None:
    vad = StreamingVad()
    quiet = np.zeros(16000 * 3, dtype=np.float32)
    quiet[16000:16040] = 0.9  # a click
    events = vad.feed(quiet)
    assert not events.cuts
    assert vad.flush() is None
    assert vad.safe_cursor > 16000 * 2


def test_the_spool_appends_reads_back_and_survives_a_torn_write(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    f = spool.open("abc")
    f.append(np.array([1, 2, 3, 4], dtype=np.int16))
    f.close()
    with spool.path("abc").open("ab") as raw:
        raw.write(b"\x05")  # half a sample from a crash mid-write
    again = SpoolFile(spool.path("abc"))
    assert again.samples == 4
    again.append(np.array([5], dtype=np.int16))
    again.close()
    back = read_samples(spool.path("abc"), 1, 5) * 32768
    assert back.round().tolist() == [2, 3, 4, 5]
    with pytest.raises(ValueError, match="session id"):
        spool.path("../etc/passwd")


def test_client_frames_round_trip_and_bools_are_not_numbers() -> None:
    hello = p.Hello(codec="pcm16", sample_rate=44100, channels=2, mode="ambient", language="en")
    assert p.parse_client(hello.to_wire()) == hello
    assert p.parse_client(p.Text("hi", id="q1").to_wire()) == p.Text("hi", id="q1")
    with pytest.raises(p.ProtocolError) as err:
        p.parse_client(json.dumps({"type": "hello", "sample_rate": True}))
    assert err.value.code == "bad_field"
    with pytest.raises(p.ProtocolError) as err:
        p.parse_client("[1, 2]")
    assert err.value.code == "malformed_json"
    frame = p.Frame.from_wire(p.Transcript("hi", True, "s:0", 0.0, 1.5).to_wire())
    assert frame == {
        "type": "transcript",
        "text": "hi",
        "final": True,
        "segment_id": "s:0",
        "start": 0.0,
        "end": 1.5,
        "question": False,
    }


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        ("Hey lifebot, what's on today?", "what's on today?"),
        ("hey Life Bot. Call mum", "Call mum"),
        ("Hey, Lifebot!", ""),
        ("They said hey lifebot", None),
        ("Hey life", None),
    ],
)
def test_the_wake_phrase_is_found_only_at_the_start(text: str, rest: str | None) -> None:
    assert strip_wake_phrase(text, "hey lifebot") == rest
