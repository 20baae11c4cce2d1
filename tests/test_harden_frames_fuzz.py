"""Fuzz of the pendant's frame parser (#18): no crash, bad input reported, good input kept.

Whatever text arrives, ``parse_client`` returns a frame or raises ProtocolError with a code the
protocol documents; valid frames always parse to what they say.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.device import protocol as p

CODES = {
    "malformed_json",
    "missing_type",
    "unknown_type",
    "bad_field",
    "bad_mode",
    "unsupported_codec",
    "unsupported_rate",
    "unsupported_channels",
}
json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
frames = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["hello", "mode", "text", "auth", "ping", "sing"]) | json_values,
        "codec": st.sampled_from(["pcm16", "opus"]) | json_values,
        "sample_rate": st.sampled_from([16000, 48000]) | json_values,
        "channels": json_values,
        "mode": st.sampled_from(["ask", "ambient"]) | json_values,
        "text": json_values,
        "token": json_values,
    },
).map(json.dumps)
nested = st.integers(1, 30_000).map(lambda n: "[" * n + "]" * n)


@settings(max_examples=500, deadline=None)
@given(st.one_of(frames, st.text(max_size=80), nested))
def test_any_text_frame_parses_or_is_refused_with_a_documented_code(raw: str) -> None:
    code: str | None = None
    try:
        frame: p.Frame | None = p.parse_client(raw)
    except p.ProtocolError as exc:
        frame, code = None, exc.code
    assert isinstance(frame, p.Frame) or code in CODES, code


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["pcm16", "opus"]),
    st.sampled_from([8000, 16000, 24000, 48000]),
    st.sampled_from([1, 2]),
    st.sampled_from(["ask", "ambient"]),
    st.text(min_size=1, max_size=30).filter(str.strip),
)
def test_good_frames_are_kept_as_sent(
    codec: str, rate: int, channels: int, mode: str, text: str
) -> None:
    hello = p.parse_client(
        json.dumps(
            {
                "type": "hello",
                "codec": codec,
                "sample_rate": rate,
                "channels": channels,
                "mode": mode,
            }
        )
    )
    assert isinstance(hello, p.Hello)
    assert (hello.codec, hello.sample_rate, hello.channels, hello.mode) == (
        codec,
        rate,
        channels,
        mode,
    )
    typed = p.parse_client(json.dumps({"type": "text", "text": text, "id": "t1"}))
    assert isinstance(typed, p.Text) and typed.text == text.strip()
