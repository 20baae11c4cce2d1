"""Omi's backend as a client: audio cut into chunks and posted the way it posts them."""

from __future__ import annotations

import httpx


def omi_chunks(pcm: bytes, rate: int, every: int = 5) -> list[bytes]:
    """Cut PCM16 like Omi's backend: one-second flushes gather until the buffer holds more than
    ``every`` seconds, then the whole buffer is one POST; a last rest under that is never sent."""
    flush = rate * 2
    out: list[bytes] = []
    buf = b""
    for i in range(0, len(pcm), flush):
        buf += pcm[i : i + flush]
        if len(buf) > rate * every * 2:
            out.append(buf)
            buf = b""
    return out


async def post_chunk(
    client: httpx.AsyncClient,
    token: str,
    chunk: bytes,
    rate: int,
    *,
    key: str | None = None,
    uid: str = "omi-user-1",
) -> httpx.Response:
    """One POST exactly as Omi's backend sends it (token in the path, rate and uid appended)."""
    headers = {"Content-Type": "application/octet-stream"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return await client.post(
        f"/omi/{token}?sample_rate={rate}&uid={uid}", content=chunk, headers=headers
    )
